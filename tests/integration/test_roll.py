"""``patchwheel roll`` end to end: a vLLM-shaped repository, its nightly channel served on
loopback like wheels.vllm.ai, a tiny speculators-shaped consumer, and a target following the
channel. The real command rebases, builds (overlays of the channel's wheels), audits, and
verifies with the install check (the tiny stack has no vLLM to extract with).

Nightlies, each a commit of vLLM's main published with a CUDA and a CPU wheel:

    N1  dev1  the target's pin; the series: P1 (engine.py mode), P2 (utils.py round_up)
    N2  dev2  an unrelated new module                       → clean
    N3  dev3  upstream fixes round_up its own way            → P2's Drop-When holds: dropped
    N4  dev4  upstream changes the line P1 changes            → conflict
    N5  dev5  N4 plus an unrelated file                      → the same conflict
    N6  dev6  Engine loses its block_size parameter          → the audit finds drift
    N7  dev7  unrelated, published without its CPU wheel     → latest walks back to N6
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import channel_support as cs
from tests import support

P2_DROP_WHEN = "vLLM pin >= 0.33.1rc1.dev3, or upstream rounds up small sizes"

CONSUMER_PY = '''\
"""Hidden-state generation on tiny vLLM."""

from vllm.engine import Engine
from vllm.utils import round_up


def generate(model: str, requests: list[int]) -> list[int]:
    engine = Engine(model, block_size=round_up(16, 8))
    engine.warm_up()
    return engine.step(requests)
'''


@dataclass
class World:
    root: Path
    vllm: Path
    speculators: Path
    channel: cs.Channel
    server: cs.ChannelServer
    series: Path  # the vllm series (P1, P2) made against N1
    cache: Path

    def build(self, dev: int) -> cs.Build:
        return self.channel.builds[dev - 1]


def _consumer(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '\n[project]\nname = "speculators"\nversion = "0.1.0"\nrequires-python = ">=3.8"\n'
        '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    pkg = path / "src" / "speculators"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""tiny speculators."""\n')
    (pkg / "gen.py").write_text(CONSUMER_PY)
    support.run_git(path, "init", "-q", "-b", "main")
    support.run_git(path, "add", "-A")
    support.run_git(path, "commit", "-q", "-m", "speculators 0.1.0")
    support.run_git(path, "tag", "v0.1.0")
    return path


def _series(vllm: Path, base: str, out: Path) -> Path:
    support.run_git(vllm, "checkout", "-q", "-b", "series", base)
    support.edit_and_commit(
        vllm,
        "vllm/engine.py",
        lambda t: t.replace('self.mode = "eager"', 'self.mode = "compiled"'),
        "engine: compile by default",
        "Origin: test\nForwarded: no\nDrop-When: vLLM pin compiles by default\n",
    )
    support.edit_and_commit(
        vllm,
        "vllm/utils.py",
        lambda t: t.replace(
            "return cdiv(x, multiple) * multiple", "return max(cdiv(x, multiple) * multiple, 1)"
        ),
        "utils: round_up never returns 0",
        f"Origin: test\nForwarded: no\nDrop-When: {P2_DROP_WHEN}\n",
    )
    support.format_patches(vllm, base, out)
    support.run_git(vllm, "checkout", "-q", "main")
    support.run_git(vllm, "branch", "-q", "-D", "series")
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("roll-world")
    vllm = cs.make_vllm_repo(root / "vllm")
    channel = cs.Channel(root / "www", vllm)
    engine = (vllm / "vllm" / "engine.py").read_text()
    utils = (vllm / "vllm" / "utils.py").read_text()
    n1 = cs.commit(vllm, {"vllm/extra.py": "X = 1\n"}, "[Misc] extra (#40001)")
    channel.publish(n1, 1)
    series = _series(vllm, n1, root / "series")
    n2 = cs.commit(vllm, {"vllm/feature.py": "Y = 2\n"}, "[Feature] a module (#40002)")
    channel.publish(n2, 2)
    fixed = utils.replace(
        "return cdiv(x, multiple) * multiple", "return cdiv(x, multiple) * multiple or multiple"
    )
    channel.publish(cs.commit(vllm, {"vllm/utils.py": fixed}, "[Bugfix] round_up (#40003)"), 3)
    graph = engine.replace('self.mode = "eager"', 'self.mode = "cudagraph"')
    channel.publish(cs.commit(vllm, {"vllm/engine.py": graph}, "[Perf] cuda graphs (#40004)"), 4)
    channel.publish(cs.commit(vllm, {"docs/notes.md": "notes\n"}, "[Doc] notes (#40005)"), 5)
    no_block = graph.replace(
        "def __init__(self, model, block_size=16):", "def __init__(self, model):"
    )
    no_block = no_block.replace("self.block_size = block_size", "self.block_size = 16")
    channel.publish(
        cs.commit(vllm, {"vllm/engine.py": no_block}, "[Core] fixed block size (#40006)"), 6
    )
    channel.publish(
        cs.commit(vllm, {"vllm/more.py": "Z = 3\n"}, "[CI] cuda only (#40007)"), 7, variants=("",)
    )
    server = cs.ChannelServer(root / "www")
    with server.running():
        yield World(
            root, vllm, _consumer(root / "speculators"), channel, server, series, root / "cache"
        )


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
    n1 = world.build(1)
    url = world.server.url
    target = tmp_path / "checkout" / "patches" / "nightly"
    (target / "vllm").mkdir(parents=True)
    names = []
    for patch in sorted(world.series.glob("*.patch")):
        if patch.name[:4] in patches:
            shutil.copyfile(patch, target / "vllm" / patch.name)
            names.append(patch.name)
    (target / "vllm" / "series").write_text("\n".join(names) + "\n")
    (target / "target.toml").write_text(
        textwrap.dedent(
            f"""\
            description = "tiny speculators on tiny vLLM nightlies"
            default = true

            [projects.speculators]
            build = "source"
            pin = "speculators @ git+{world.speculators.as_uri()}@v0.1.0"

            [projects.vllm]
            build = "overlay"
            pin = "vllm @ git+{world.vllm.as_uri()}@{n1.commit}"

            [projects.vllm.variants.cuda]
            pin = "vllm @ {n1.url(url)}"

            [projects.vllm.variants.cpu]
            pin = "vllm @ {n1.url(url, "cpu")}"

            [projects.vllm.channel]
            index = "{url}"
            repository = "{world.vllm.as_uri()}"

            [projects.vllm.channel.variants]
            cuda = {{ path = "", local = "" }}
            """
        )
    )
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
    md = (co.root / "build" / "nightly" / "roll.md").read_text()
    assert "green: rebased, built, audited and verified" in md and n2.version in md
    assert (co.root / "build" / "nightly" / "rebase.md").is_file()

    again = co.roll("--to", n2.commit[:9])
    assert again.returncode == 0, again.stderr
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
