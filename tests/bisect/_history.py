"""A provider repository shaped like vLLM's history, and a workspace whose targets consume it.

``vllm`` (a real git repo): 75 first-parent commits after ``v0.1.0``, squash-merge style
subjects ``… (#NNNN)``, one side branch merged with ``--no-ff``. Planted changes:

- step 23 adds ``Executor.compile_or_warm_up_model`` and ``Executor.get_supported_layouts``;
- step 41 removes ``Request``'s ``eos_token_id`` keyword (the consumer passes it);
- step 50 adds ``Executor.set_layout``;
- step 60 adds a required ``kv_layer`` to the ``KVConnectorBase.save`` hook (the consumer's
  connector overrides it without);
- step 70 is tagged ``v0.2.0``; step 73 adds ``vllm.v1.layout.resolve_layout``; step 75 is
  ``v0.3.0``.

``speculators`` (a real git repo) calls the provider and subclasses its connector base; its
patch series (``0001``) adds the
calls to the APIs of steps 23, 50 and 73, the way patchwheel's series answer vLLM's changes.
Its own history runs 12 commits from ``v0.3.0`` to ``v0.4.0``; commit 5 stops passing
``eos_token_id``.
Targets: ``old`` pins vllm ``v0.1.0`` (the consumer breaks later: step 41 appears), ``new``
pins vllm ``v0.3.0`` (the patch's APIs exist: steps 23 and 50 disappear in v0.1.0..v0.2.0,
and step 73 lies beyond that range).
"""

from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from patchwheel.config.targets import load_target
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.resolve import lock_target
from patchwheel.workspace import Workspace
from tests import support

STEPS = 75
GOOD, BAD, NEWEST = 0, 70, 75
APPEARS = 41  # eos_token_id removed
ADDED = 23  # compile_or_warm_up_model, get_supported_layouts
LAYOUT = 50  # set_layout
HOOK = 60  # KVConnectorBase.save gains kv_layer (an override-signature finding appears)
RESOLVE = 73  # resolve_layout (beyond v0.2.0)
SIDE_FROM, MERGE = 10, 30  # a side branch from step 10, merged at step 30
CONSUMER_STEPS, CONSUMER_FIX = 12, 5  # speculators v0.3.0..v0.4.0; the eos_token_id call goes

EXECUTOR = '''
class Executor:
    """Runs the model on workers."""

    def initialize_from_config(self, kv_cache_configs: list[int]) -> None:
        self.configs = kv_cache_configs
{extra}

class MultiprocExecutor(Executor):
    def collective_rpc(self, method: str) -> list[int]:
        return [len(method)]
'''

WARM = """
    def compile_or_warm_up_model(self) -> None:
        self.warm = True

    def get_supported_layouts(self) -> list[list[str]]:
        return [["NHD"]]
"""

SET_LAYOUT = """
    def set_layout(self, layout_name: str) -> None:
        self.layout = layout_name
"""

REQUEST = """
class Request:
    def __init__(
        self, request_id: str, prompt_token_ids: list[int]{eos}
    ) -> None:
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
"""

CONNECTOR_BASE = """
class KVConnectorBase:
    def save(self, layer_name: str{kv_layer}) -> None:
        self.saved = layer_name
"""

CONNECTOR = """
from vllm.v1.connector import KVConnectorBase


class HiddenStatesConnector(KVConnectorBase):
    def save(self, layer_name: str) -> None:
        self.layer = layer_name
"""

LAYOUT_MODULE = """
def resolve_layout(supported: list[list[str]]) -> str:
    return supported[0][0]
"""

CONSUMER = """
from vllm.v1.executor import MultiprocExecutor
from vllm.v1.request import Request


def run(executor: MultiprocExecutor) -> Request:
    executor.initialize_from_config([1])
    return Request(request_id="r", prompt_token_ids=[1], eos_token_id=2)
"""

PATCHED = """
from vllm.v1.executor import MultiprocExecutor
from vllm.v1.layout import resolve_layout
from vllm.v1.request import Request


def run(executor: MultiprocExecutor) -> Request:
    executor.initialize_from_config([1])
    # vLLM no longer warms up in initialize_from_config: do it here.
    executor.compile_or_warm_up_model()
    layout = resolve_layout(executor.get_supported_layouts())
    executor.set_layout(layout)
    return Request(request_id="r", prompt_token_ids=[1], eos_token_id=2)
"""

PATCH_MESSAGE = """generator: warm up and resolve the KV layout after initialize_from_config

The provider moved the warm-up out of initialize_from_config and resolves the KV cache
layout in the engine; the generator drives the executor itself, so it does both.

Origin: patchwheel
Forwarded: no
Drop-When: never
"""


@dataclass(frozen=True)
class History:
    """The provider repo, its first-parent commits by step, and the side branch's commits."""

    repo: Path
    commits: list[str]  # commits[i]: step i of the main line (0 = v0.1.0)
    side: list[str]  # the merged side branch's own commits
    release: str  # a commit on an unmerged release branch (from step 5)


def _env(step: int) -> dict[str, str]:
    date = f"{1_780_000_000 + step * 3600} +0000"
    return {**support.git_env(), "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}


def _git(repo: Path, *args: str, step: int = 0) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=_env(step), check=True, capture_output=True, text=True
    ).stdout.strip()


def _write(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def _provider_files(step: int) -> dict[str, str]:
    extra = (WARM if step >= ADDED else "") + (SET_LAYOUT if step >= LAYOUT else "")
    files = {
        "vllm/v1/executor.py": EXECUTOR.format(extra=extra),
        "vllm/v1/request.py": REQUEST.format(
            eos="" if step >= APPEARS else ", eos_token_id: int | None = None"
        ),
        "vllm/notes.py": f"CHANGES = {step}\n",
        "vllm/v1/connector.py": CONNECTOR_BASE.format(
            kv_layer=", kv_layer: int" if step >= HOOK else ""
        ),
    }
    if step >= RESOLVE:
        files["vllm/v1/layout.py"] = LAYOUT_MODULE
    return files


def _subject(step: int) -> str:
    named = {
        ADDED: "[Elastic] Async preparation",
        APPEARS: "[Frontend] Drop eos_token_id from Request",
        LAYOUT: "[KV-Cache Layout] set_layout RPC",
        HOOK: "[KV Connector] Pass the layer to save",
        RESOLVE: "[KV-Cache Layout] Standardize KV cache layout",
    }
    return f"{named.get(step, f'[Misc] Change {step}')} (#{1000 + step})"


def make_provider(path: Path) -> History:
    """The vLLM-shaped repository (see the module docstring)."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _write(
        path,
        {
            "pyproject.toml": '[project]\nname = "vllm"\nversion = "0.1.0"\n',
            "vllm/__init__.py": '"""vllm."""\n',
            "vllm/v1/__init__.py": "",
            "docs/big.html": "<html>not needed by the audit</html>\n",
            **_provider_files(0),
        },
    )
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Initial (#1000)")
    commits = [_git(path, "rev-parse", "HEAD")]
    side: list[str] = []
    for step in range(1, STEPS + 1):
        if step == MERGE:
            _git(path, "checkout", "-q", "-b", "feature", commits[SIDE_FROM])
            for n in (1, 2):
                _write(path, {"vllm/feature.py": f"SIDE = {n}\n"})
                _git(path, "add", "-A")
                _git(path, "commit", "-q", "-m", f"feature part {n}", step=step)
                side.append(_git(path, "rev-parse", "HEAD"))
            _git(path, "checkout", "-q", "main")
            _git(path, "merge", "-q", "--no-ff", "--no-commit", "feature", step=step)
            _write(path, _provider_files(step))
            _git(path, "add", "-A")
            _git(path, "commit", "-q", "-m", _subject(step), step=step)
        else:
            _write(path, _provider_files(step))
            _git(path, "add", "-A")
            _git(path, "commit", "-q", "-m", _subject(step), step=step)
        commits.append(_git(path, "rev-parse", "HEAD"))
    for step, tag in ((GOOD, "v0.1.0"), (BAD, "v0.2.0"), (NEWEST, "v0.3.0")):
        _git(path, "tag", tag, commits[step])
    _git(path, "checkout", "-q", "-b", "releases/v0.1", commits[5])
    _write(path, {"vllm/notes.py": "CHANGES = 'release'\n"})
    _git(path, "commit", "-qam", "Release 0.1.1 (cherry-pick)", step=5)
    release = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-q", "main")
    return History(path, commits, side, release)


def truncated(history: History, path: Path) -> Path:
    """A bare mirror of `history` whose main line stops at v0.2.0 (like a mirror fetched then)."""
    _git(path.parent, "init", "-q", "--bare", str(path))
    _git(
        path,
        "fetch",
        "-q",
        str(history.repo),
        "refs/tags/v0.2.0:refs/heads/main",
        "refs/tags/v0.1.0:refs/tags/v0.1.0",
    )
    return path


def release_index(history: History, base: Path) -> str:
    """A PEP 503 index of vllm sdists made from main-line steps; returns its file:// URL.

    0.1.0 = step 0, 0.1.1 = 23, 0.1.2 = 41, 0.1.3 = 50, 0.2.0rc1 = 60 (a pre-release, not a
    step of a bisect), 0.2.0 = 70, 0.3.0 = 75.
    """
    releases = {
        "0.1.0": GOOD,
        "0.1.1": ADDED,
        "0.1.2": APPEARS,
        "0.1.3": LAYOUT,
        "0.2.0rc1": 60,
        "0.2.0": BAD,
        "0.3.0": NEWEST,
    }
    files = []
    for version, step in releases.items():
        tree = base / "trees" / version
        tree.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar", history.commits[step]],
            cwd=history.repo,
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        files.append(support.make_sdist(tree, base / "dist", "vllm", version))
    return support.write_index(base / "simple", files)


def make_consumer(path: Path) -> tuple[Path, str]:
    """The speculators-shaped repository; returns it and the commit its series applies to."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _write(
        path,
        {
            "pyproject.toml": (
                '[project]\nname = "speculators"\nversion = "0.3.0"\n'
                'dependencies = ["vllm==0.1.0"]\n'
            ),
            "src/speculators/__init__.py": "",
            "src/speculators/generator.py": CONSUMER,
            "src/speculators/connector.py": CONNECTOR,
        },
    )
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "speculators 0.3.0")
    _git(path, "tag", "v0.3.0")
    base = _git(path, "rev-parse", "HEAD")
    for step in range(1, CONSUMER_STEPS + 1):
        files = {"NOTES.md": f"change {step}\n"}
        if step == CONSUMER_FIX:
            files["src/speculators/generator.py"] = CONSUMER.replace(", eos_token_id=2", "")
        _write(path, files)
        _git(path, "add", "-A")
        subject = "Stop passing eos_token_id" if step == CONSUMER_FIX else f"Chore {step}"
        _git(path, "commit", "-q", "-m", f"{subject} (#{200 + step})", step=step)
    _git(path, "tag", "v0.4.0")
    return path, base


def write_series(consumer: Path, out_dir: Path) -> list[str]:
    """Patch 0001 (the calls to the new APIs) as a series under `out_dir`, via a scratch branch."""
    _git(consumer, "checkout", "-q", "-b", "patched", "v0.3.0")
    _write(consumer, {"src/speculators/generator.py": PATCHED})
    _git(consumer, "add", "-A")
    _git(consumer, "commit", "-q", "-m", PATCH_MESSAGE)
    names = support.format_patches(consumer, "v0.3.0", out_dir)
    _git(consumer, "checkout", "-q", "main")
    return names


def write_target(root: Path, name: str, consumer: Path, provider: Path, vllm_rev: str) -> None:
    """``patches/<name>/target.toml`` pinning both repos (vllm at `vllm_rev`)."""
    path = root / "patches" / name / "target.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'description = "bisect test target {name}"\n'
        f"default = {'true' if name == 'new' else 'false'}\n\n"
        "[projects.speculators]\n"
        'build = "source"\n'
        f'pin = "speculators @ git+{consumer.as_uri()}@v0.3.0"\n\n'
        "[projects.vllm]\n"
        'build = "source"\n'
        f'pin = "vllm @ git+{provider.as_uri()}@{vllm_rev}"\n'
    )


@dataclass(frozen=True)
class Setup:
    root: Path
    history: History
    consumer: Path
    cache: Path


def make_setup(base: Path) -> Setup:
    """Both repos, and a checkout with targets ``old`` and ``new`` (one series each)."""
    history = make_provider(base / "vllm")
    consumer, _ = make_consumer(base / "speculators")
    root = base / "checkout"
    for name, rev in (("old", "v0.1.0"), ("new", "v0.3.0")):
        write_target(root, name, consumer, history.repo, rev)
        write_series(consumer, root / "patches" / name / "speculators")
        _git(consumer, "branch", "-q", "-D", "patched")
    return Setup(root, history, consumer, base / "cache")


def lock(setup: Setup) -> None:
    """Resolve both targets' pins (local git repos) into their lock files."""
    cache = Cache(setup.cache)
    for name in ("old", "new"):
        lock_target(load_target(setup.root / "patches", name), cache)


def workspace(setup: Setup) -> Workspace:
    return Workspace.at(setup.root)
