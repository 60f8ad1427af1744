"""``patchwheel roll`` end to end on the world of :mod:`tests.roll_world`: a vLLM-shaped
repository, its nightly channel served on loopback like wheels.vllm.ai, a tiny speculators-shaped
consumer, and a target following the channel. The real command rebases, builds (overlays of the
channel's wheels), audits, and verifies with the install check (the tiny stack has no vLLM to
extract with).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

from tests import support
from tests.roll_world import World, make_world, write_target


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with make_world(tmp_path_factory.mktemp("roll-world")) as made:
        yield made


@dataclass
class Checkout:
    root: Path
    world: World

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return support.patchwheel(self.root, *args, cache=self.world.cache)

    def roll(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("roll", "--target", "nightly", "--verify", "install", *args)

    def report(self, target: str = "nightly") -> dict:
        return json.loads((self.root / "build" / target / "roll.json").read_text())


def checkout_at(
    world: World, tmp_path: Path, patches: tuple[str, ...] = ("0001", "0002")
) -> Checkout:
    """A checkout whose target `nightly` is pinned to N1, built."""
    write_target(world, tmp_path / "checkout", patches)
    co = Checkout(tmp_path / "checkout", world)
    locked = co.run("lock")
    assert locked.returncode == 0, locked.stderr
    built = co.run("build", "--no-audit")  # the consumer declares no vLLM version to audit against
    assert built.returncode == 0, built.stderr
    return co


def classes(report: dict) -> dict[str, str]:
    [vllm] = [p for p in report["rebase"]["projects"] if p["name"] == "vllm"]
    return {row["name"][:4]: row["class"] for row in vllm["patches"]}


def test_roll_to_the_next_nightly_is_green(world: World, tmp_path: Path) -> None:
    co = checkout_at(world, tmp_path)
    n2 = world.build(2)
    result = co.roll("--to", n2.version, "--json")
    assert result.returncode == 0, result.stderr
    report = co.report()
    assert json.loads(result.stdout) == report
    assert report["status"] == "green" and report["exit-status"] == 0
    assert report["new"]["version"] == n2.version and report["new"]["commit"] == n2.commit
    assert report["old"]["commit"] == world.build(1).commit
    assert report["new"]["pins"]["vllm"] == f"vllm @ git+{world.vllm.as_uri()}@{n2.commit}"
    assert report["new"]["pins"]["vllm:cpu"] == f"vllm @ {n2.url(world.server.url, 'cpu')}"
    assert report["new"]["wheels"]["cpu"]["sha256"] == support.sha256(n2.wheels["cpu"])
    assert classes(report) == {"0001": "clean", "0002": "clean"}
    assert report["audit"]["status"] == "passed"
    assert report["verification"]["status"] == "passed"
    assert report["verification"]["imported"] == ["speculators", "vllm"]
    assert report["bisect"] is None and report["next"] == []
    assert set(report["timings"]) >= {"discover", "rebase", "build", "verify", "total"}

    toml = (co.root / "patches" / "nightly" / "target.toml").read_text()
    assert f"@{n2.commit}" in toml and n2.url(world.server.url, "cpu") in toml
    assert f'sha256 = "{support.sha256(n2.wheels["cpu"])}"' in toml
    lock = (co.root / "patches" / "nightly" / "target.lock").read_text()
    assert f'version = "{n2.version}"' in lock
    manifest = json.loads((co.root / "build" / "nightly" / "manifest.json").read_text())
    versions = {w["variant"]: w["version"] for w in manifest["wheels"] if w["project"] == "vllm"}
    assert versions["cuda"].startswith(n2.version + ".pw")  # the channel's label, composed
    assert versions["cpu"].startswith(n2.version + ".cpu.pw")
    # the pinned extras followed the nightly (both variants are the distribution vllm)
    speculators = next(w for w in manifest["wheels"] if w["project"] == "speculators")
    public = Version(n2.version).public
    assert speculators["details"]["extras"]["added"] == [
        f'vllm=={public}; extra == "datagen"',
        f'vllm=={public}; extra == "datagen-cpu"',
    ]
    md = (co.root / "build" / "nightly" / "roll.md").read_text()
    assert "green: rebased, built, audited and verified" in md and n2.version in md
    assert (co.root / "build" / "nightly" / "rebase.md").is_file()

    seen = len(world.server.requests)
    again = co.roll("--to", n2.commit[:9])
    assert again.returncode == 0, again.stderr
    # locked wheels are verified from the cache, not downloaded again
    assert not [r for r in world.server.requests[seen:] if r.endswith(".whl")]
    assert "nightly is up to date" in again.stderr
    assert co.report()["status"] == "up-to-date"


def test_roll_drops_a_patch_whose_drop_when_holds(world: World, tmp_path: Path) -> None:
    co = checkout_at(world, tmp_path)
    result = co.roll("--to", world.build(3).version)
    assert result.returncode == 0, result.stderr
    report = co.report()
    assert report["status"] == "green"
    assert classes(report) == {"0001": "clean", "0002": "upstream"}
    [vllm] = [p for p in report["rebase"]["projects"] if p["name"] == "vllm"]
    row = next(r for r in vllm["patches"] if r["name"].startswith("0002"))
    assert row["reason"].startswith("its Drop-When holds for the new pins: ")
    assert f"(vllm {world.build(3).version})" in row["reason"]
    assert row["touches-upstream-changes"] == ["vllm/utils.py"] and not row["kept"]
    series = (co.root / "patches" / "nightly" / "vllm" / "series").read_text()
    assert "0002" not in series


def test_roll_stops_on_a_conflict_and_remembers_its_resolution(
    world: World, tmp_path: Path
) -> None:
    co = checkout_at(world, tmp_path)
    stopped = co.roll("--to", world.build(4).version, "--new-target", "n4")
    assert stopped.returncode == 1, stopped.stderr
    vendor = co.root / "vendor" / "n4" / "vllm"
    err = " ".join(stopped.stderr.split())
    assert f"git -C {vendor} add vllm/engine.py" in err
    assert "nox -s roll -- --target nightly --continue" in err
    report = co.report("n4")
    assert report["status"] == "needs-person" and report["stop"]["patch"].startswith("0001")
    assert report["next"][1] == "nox -s roll -- --target nightly --continue"

    resolved = (vendor / "vllm" / "engine.py").read_text()
    start, end = resolved.index("<<<<<<<"), resolved.index(">>>>>>>")
    end = resolved.index("\n", end) + 1
    resolved = resolved[:start] + '        self.mode = "compiled-cudagraph"\n' + resolved[end:]
    (vendor / "vllm" / "engine.py").write_text(resolved)
    support.run_git(vendor, "add", "vllm/engine.py")
    done = co.roll("--continue")
    assert done.returncode == 0, done.stderr
    report = co.report("n4")
    assert report["status"] == "green"
    assert classes(report) == {"0001": "conflict", "0002": "upstream"}
    [vllm] = [p for p in report["rebase"]["projects"] if p["name"] == "vllm"]
    assert vllm["rerere"]["recorded"]
    assert (co.root / "patches" / "nightly" / "vllm" / "rr-cache").is_dir()

    # a further nightly with the same upstream change: the conflict resolves itself
    again = co.roll("--to", world.build(5).version, "--new-target", "n5")
    assert again.returncode == 0, again.stderr
    report = co.report("n5")
    assert report["status"] == "green"
    [vllm] = [p for p in report["rebase"]["projects"] if p["name"] == "vllm"]
    row = next(r for r in vllm["patches"] if r["name"].startswith("0001"))
    assert row["resolution"] == "resolved by a remembered resolution (rerere)"
    assert vllm["rerere"]["reused-by"] == [row["name"]]
    patch = (co.root / "patches" / "n5" / "vllm" / row["name"]).read_text()
    assert '+        self.mode = "compiled-cudagraph"' in patch
    assert (
        "Remembered resolutions (rerere) resolved the conflicts"
        in (co.root / "build" / "n5" / "roll.md").read_text()
    )


def test_roll_to_latest_reports_new_drift(world: World, tmp_path: Path) -> None:
    co = checkout_at(world, tmp_path, patches=("0002",))
    result = co.roll()
    assert result.returncode == 1, result.stderr
    report = co.report()
    n6 = world.build(6)
    assert report["new"]["commit"] == n6.commit and report["new"]["probed"] == 2
    assert report["status"] == "needs-person"
    assert report["audit"]["status"] == "findings"
    symbols = {f["symbol"] for f in report["audit"]["findings"]}
    assert any("Engine" in s for s in symbols), symbols
    assert report["bisect"]["good"] == world.build(1).commit
    assert report["bisect"]["bad"] == n6.commit
    # the bisect names the nightly commit that removed the keyword the consumer passes
    assert report["bisect"]["status"] == "ran", report["bisect"]
    flips = report["bisect"]["report"]["flips"]
    assert {f["commit"]["id"] for f in flips} == {n6.commit}, flips
    assert "[Core] fixed block size (#40006)" in report["bisect"]["markdown"]
    assert report["verification"]["status"] == "skipped"
    assert "answer the drift" in report["next"][0]


def test_roll_errors_exit_2(world: World, tmp_path: Path) -> None:
    co = checkout_at(world, tmp_path, patches=())
    bad = co.roll("--to", "0.33.0")
    assert bad.returncode == 2 and "carries no commit label" in bad.stderr
    missing = co.roll("--to", world.build(7).commit)
    assert missing.returncode == 2 and "has no wheel for variant(s) cpu" in missing.stderr
    nothing = co.roll("--continue")
    assert nothing.returncode == 2 and "no roll of nightly is in progress" in nothing.stderr
