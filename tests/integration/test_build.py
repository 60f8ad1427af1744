"""End-to-end builds of a tiny target from a real local git repo, through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from patchwheel.wheels.record import verify_record
from tests import support
from tests.conftest import Checkout


def add_patches(co: Checkout) -> list[str]:
    """Three patches on tinyproj's core.py; the third has two hunks."""
    repo = co.upstream
    base = support.run_git(repo, "rev-parse", "v1.0")
    support.edit_and_commit(
        repo, "src/tinyproj/core.py", lambda t: t.replace('"hello "', '"hi "'), "core: say hi"
    )
    support.edit_and_commit(
        repo,
        "src/tinyproj/extra.py",
        lambda t: '"""Added by a patch."""\n\nPATCHED = True\n',
        "extra: add a module",
    )
    support.edit_and_commit(
        repo,
        "src/tinyproj/core.py",
        lambda t: t.replace('"""Add two numbers."""', '"""Add two numbers (patched)."""').replace(
            "return (1, 0)", "return (1, 0, 1)"
        ),
        "core: two hunks",
    )
    names = support.format_patches(repo, base, co.series_dir())
    support.run_git(repo, "checkout", "-q", "v1.0")
    return names


def manifest(co: Checkout, target: str = "tiny") -> dict:
    return json.loads((co.build / target / "manifest.json").read_text())


def snapshot_build(co: Checkout) -> dict[str, object]:
    """Everything a failed run must leave alone in build/ (links, file names and bytes)."""
    out: dict[str, object] = {}
    for path in sorted(co.build.rglob("*")):
        rel = str(path.relative_to(co.build))
        if rel.startswith(".locks"):
            continue
        if path.is_symlink():
            out[rel] = "->" + os.readlink(path)
        elif path.is_file():
            out[rel] = support.sha256(path)
    return out


def snapshot_vendor(co: Checkout) -> dict[str, object]:
    tree = co.vendor / "tiny" / "tinyproj"
    files = {
        str(p.relative_to(tree)): support.sha256(p)
        for p in sorted(tree.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(tree).parts
    }
    return {
        "head": support.run_git(tree, "rev-parse", "HEAD"),
        "upstream": support.run_git(tree, "rev-parse", "upstream"),
        "status": support.run_git(tree, "status", "--porcelain"),
        "files": files,
    }


def test_lock_resolves_tag_to_commit(checkout: Checkout) -> None:
    result = checkout.run("lock")
    assert result.returncode == 0, result.stderr
    lock = (checkout.patches / "tiny" / "target.lock").read_text()
    commit = support.run_git(checkout.upstream, "rev-parse", "v1.0^{commit}")
    assert f'commit = "{commit}"' in lock
    assert 'rev = "v1.0"' in lock


def test_moved_tag_is_refused_naming_both_commits(checkout: Checkout) -> None:
    assert checkout.run("lock").returncode == 0
    old = support.run_git(checkout.upstream, "rev-parse", "v1.0")
    new = support.commit_file(checkout.upstream, "NEWS", "moved\n", "news")
    support.run_git(checkout.upstream, "tag", "-f", "v1.0", new)

    relock = checkout.run("lock")
    assert relock.returncode == 1
    assert "v1.0" in relock.stderr and old in relock.stderr and new in relock.stderr
    assert "--update" in relock.stderr

    build = checkout.run("build", "--no-audit")  # a cold cache fetches, and sees the move
    assert build.returncode == 1
    assert old in build.stderr and new in build.stderr
    assert not (checkout.build / "tiny").exists()

    accepted = checkout.run("lock", "--update", "tinyproj")
    assert accepted.returncode == 0, accepted.stderr
    assert new in (checkout.patches / "tiny" / "target.lock").read_text()


def test_changed_pin_requires_relock(checkout: Checkout) -> None:
    assert checkout.run("lock").returncode == 0
    checkout.write_target(f"tinyproj @ git+{checkout.upstream.as_uri()}@main")
    result = checkout.run("build", "--no-audit")
    assert result.returncode == 1
    assert "changed" in result.stderr and "nox -s lock" in result.stderr


def test_option_like_git_url_is_refused(checkout: Checkout) -> None:
    checkout.write_target("tinyproj @ git+file:///x@--upload-pack=touch")
    result = checkout.run("lock")
    assert result.returncode == 1
    assert "starts with '-'" in result.stderr


def test_build_installs_from_index_and_carries_patches(checkout: Checkout, tmp_path: Path) -> None:
    add_patches(checkout)
    assert checkout.run("lock").returncode == 0
    result = checkout.run("build", "--no-audit")
    assert result.returncode == 0, result.stderr

    data = manifest(checkout)
    [wheel] = data["wheels"]
    assert wheel["version"].startswith("1.0+pw") and wheel["patched"]
    assert [p["name"] for p in data["projects"]["tinyproj"]["patches"]] == [
        "0001-core-say-hi.patch",
        "0002-extra-add-a-module.patch",
        "0003-core-two-hunks.patch",
    ]
    path = checkout.build / "tiny" / "wheels" / wheel["filename"]
    assert support.sha256(path) == wheel["sha256"]
    assert verify_record(path) == []

    python = support.fresh_venv(tmp_path / "venv")
    install = support.pip(
        python,
        "install",
        "--no-deps",
        "--index-url",
        (checkout.build / "simple").as_uri(),
        "tinyproj",
    )
    assert install.returncode == 0, install.stdout + install.stderr
    check = subprocess.run(
        [
            str(python),
            "-c",
            "import tinyproj.core as c, tinyproj.extra as e, importlib.metadata as m;"
            "print(c.greet('x'), c.version_tuple(), e.PATCHED, m.version('tinyproj'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.split()[:2] == ["hi", "x"]
    assert "(1, 0, 1) True" in check.stdout
    assert wheel["version"] in check.stdout

    vendor = checkout.vendor / "tiny" / "tinyproj"
    log = support.run_git(vendor, "log", "--format=%an|%s", "upstream..HEAD").splitlines()
    assert log == [
        "Test Author|core: two hunks",
        "Test Author|extra: add a module",
        "Test Author|core: say hi",
    ]


def test_failing_hunk_leaves_vendor_and_build_unchanged(checkout: Checkout) -> None:
    add_patches(checkout)
    assert checkout.run("lock").returncode == 0
    assert checkout.run("build", "--no-audit").returncode == 0
    before_build = snapshot_build(checkout)
    before_vendor = snapshot_vendor(checkout)

    bad = checkout.series_dir() / "0003-core-two-hunks.patch"
    bad.write_text(bad.read_text().replace(" def version_tuple():", " def version_tuple_():"))
    result = checkout.run("build", "--no-audit")

    assert result.returncode == 1
    err = " ".join(result.stderr.split())
    assert "patch 0003-core-two-hunks.patch" in err
    assert "src/tinyproj/core.py hunk #2" in err
    assert "(@@ -23,4 +23,4 @@ def describe():)" in err
    assert "expected 'def version_tuple_():', found 'def version_tuple():'" in err
    assert "is as it was before this run; build/ is untouched" in err
    assert snapshot_vendor(checkout) == before_vendor
    assert snapshot_build(checkout) == before_build


def test_rebuild_nothing_and_reproducible_from_clean(checkout: Checkout, tmp_path: Path) -> None:
    add_patches(checkout)
    assert checkout.run("lock").returncode == 0
    first = checkout.run("build", "--no-audit")
    assert first.returncode == 0, first.stderr
    sha_first = manifest(checkout)["wheels"][0]["sha256"]

    again = checkout.run("build", "--no-audit")
    assert again.returncode == 0
    assert "up to date" in again.stderr and "nothing rebuilt" in again.stderr

    # From clean: no build/, no vendor/, an empty cache.
    for path in (checkout.build, checkout.vendor, checkout.cache):
        subprocess.run(["rm", "-rf", str(path)], check=True)
    second = checkout.run("build", "--no-audit")
    assert second.returncode == 0, second.stderr
    assert "built" in second.stderr
    assert manifest(checkout)["wheels"][0]["sha256"] == sha_first


def test_changed_patch_rebuilds_with_new_label(checkout: Checkout) -> None:
    add_patches(checkout)
    assert checkout.run("lock").returncode == 0
    assert checkout.run("build", "--no-audit").returncode == 0
    label_before = manifest(checkout)["wheels"][0]["label"]
    patch = checkout.series_dir() / "0001-core-say-hi.patch"
    patch.write_text(patch.read_text().replace("Drop-When: never", "Drop-When: upstream says hi"))
    result = checkout.run("build", "--no-audit")
    assert result.returncode == 0, result.stderr
    assert manifest(checkout)["wheels"][0]["label"] != label_before
    assert "applied 3 patch(es)" in result.stderr  # replayed from the changed first patch


def test_concurrent_builds_wait_for_each_other(checkout: Checkout) -> None:
    add_patches(checkout)
    assert checkout.run("lock").returncode == 0
    env = {**os.environ, "PATCHWHEEL_CACHE": str(checkout.cache)}
    cmd = [sys.executable, "-m", "patchwheel", "--root", str(checkout.root), "build", "--no-audit"]
    procs = [subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert any("waiting for another patchwheel run" in o for o in outputs)
    assert any("nothing rebuilt" in o for o in outputs)


@pytest.mark.parametrize("delay", [0.3, 0.8, 1.5, 2.5, 4.0])
def test_killed_build_keeps_last_good_outputs(checkout: Checkout, delay: float) -> None:
    assert checkout.run("lock").returncode == 0
    names = add_patches(checkout)
    # A first good build with two patches, then a killed build with all three.
    (checkout.series_dir() / "series").write_text("\n".join(names[:2]) + "\n")
    assert checkout.run("build", "--no-audit").returncode == 0
    good = snapshot_build(checkout)
    (checkout.series_dir() / "series").write_text("\n".join(names) + "\n")

    env = {**os.environ, "PATCHWHEEL_CACHE": str(checkout.cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchwheel", "--root", str(checkout.root), "build", "--no-audit"],
        env=env,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    current = snapshot_build(checkout)
    if current != good:  # the kill came after the swap: then the new outputs are complete
        data = manifest(checkout)
        for wheel in data["wheels"]:
            path = checkout.build / "tiny" / "wheels" / wheel["filename"]
            assert support.sha256(path) == wheel["sha256"]
    rerun = checkout.run("build", "--no-audit")
    assert rerun.returncode == 0, rerun.stderr
    wheel = manifest(checkout)["wheels"][0]
    assert verify_record(checkout.build / "tiny" / "wheels" / wheel["filename"]) == []
    stores = [p.name for p in (checkout.build / ".store").iterdir() if p.name.startswith("tiny.")]
    assert len(stores) == 1


# A setup.py like speculators' and hs-connectors': it keeps the version file of its sdist only
# when it runs in the sdist's own folder (``<name>-<version>``), else writes a nightly one.
FOLDER_SETUP_PY = """\
from pathlib import Path
from setuptools import setup

here = Path(__file__).parent
stamp = here / "src" / "stamped" / "stamp.py"
if not here.name.startswith("stamped-"):
    stamp.write_text('build = "nightly"\\n')
setup()
"""


def test_always_build_builds_an_unpatched_sdist_in_its_own_folder(tmp_path: Path) -> None:
    src = tmp_path / "stamped-src"
    support.make_upstream(src, name="stamped", version="2.0")
    (src / "setup.py").write_text(FOLDER_SETUP_PY)
    (src / "src" / "stamped" / "stamp.py").write_text('build = "release"\n')
    sdist = support.make_sdist(src, tmp_path / "files", "stamped", "2.0")
    env = {"PATCHWHEEL_INDEX_URL": support.write_index(tmp_path / "index", [sdist])}
    root = tmp_path / "checkout"
    (root / "patches" / "t").mkdir(parents=True)
    (root / "patches" / "t" / "target.toml").write_text(
        'description = "always-build"\ndefault = true\n\n[projects.stamped]\nbuild = "source"\n'
        'pin = "stamped==2.0"\nalways-build = true\n'
    )
    cache = tmp_path / "cache"
    for verb in (("lock",), ("build", "--no-audit")):
        result = support.patchwheel(root, *verb, cache=cache, env=env)
        assert result.returncode == 0, result.stderr
    [wheel] = json.loads((root / "build" / "t" / "manifest.json").read_text())["wheels"]
    # Built and labelled although the series is empty (not the sdist served as it is) ...
    assert wheel["action"] == "built" and wheel["patched"] is True
    assert wheel["version"].startswith("2.0+pw") and wheel["filename"].endswith(".whl")
    # ... in the sdist's folder, so its build script kept the sdist's own version file.
    with zipfile.ZipFile(root / "build" / "t" / "wheels" / wheel["filename"]) as archive:
        assert archive.read("stamped/stamp.py") == b'build = "release"\n'
