"""The world of the roll tests and benchmark: a vLLM-shaped repository whose nightlies are
published on a channel served on loopback (:mod:`tests.channel_support`), a tiny
speculators-shaped consumer, and a patch series against the first nightly.

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

import shutil
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


def make_consumer(path: Path) -> Path:
    """A tiny speculators calling into tiny vLLM, tagged v0.1.0."""
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


def make_series(vllm: Path, base: str, out: Path) -> Path:
    """P1 and P2 against ``base``, as format-patch files and a series in ``out``."""
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


@contextmanager
def make_world(root: Path) -> Iterator[World]:
    """The repositories and the channel of N1..N7, served while the context lasts."""
    vllm = cs.make_vllm_repo(root / "vllm")
    channel = cs.Channel(root / "www", vllm)
    engine = (vllm / "vllm" / "engine.py").read_text()
    utils = (vllm / "vllm" / "utils.py").read_text()
    n1 = cs.commit(vllm, {"vllm/extra.py": "X = 1\n"}, "[Misc] extra (#40001)")
    channel.publish(n1, 1)
    series = make_series(vllm, n1, root / "series")
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
            root, vllm, make_consumer(root / "speculators"), channel, server, series, root / "cache"
        )


def write_target(world: World, root: Path, patches: tuple[str, ...] = ("0001", "0002")) -> Path:
    """``root/patches/nightly``: pinned to N1, following the channel, the chosen patches."""
    n1 = world.build(1)
    url = world.server.url
    target = root / "patches" / "nightly"
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

            [projects.speculators.extras]
            datagen = ["vllm:cuda"]
            datagen-cpu = ["vllm:cpu"]

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
    return target
