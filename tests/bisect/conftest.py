"""Fixtures: the vLLM-shaped history, a checkout with two targets, and their bisects (run once)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from patchwheel.audit import MypyEngine
from patchwheel.bisect import BisectReport, bisect_target
from patchwheel.upstream.cache import Cache
from tests.bisect import _history


@pytest.fixture(scope="session")
def setup(tmp_path_factory: pytest.TempPathFactory) -> _history.Setup:
    """The provider and consumer repos and a checkout whose targets are locked."""
    made = _history.make_setup(tmp_path_factory.mktemp("bisect"))
    _history.lock(made)
    return made


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> MypyEngine:
    return MypyEngine(cache_dir=tmp_path_factory.mktemp("bisect-audit"))


@dataclass(frozen=True)
class Ran:
    report: BisectReport
    output: str


def run_bisect(
    setup: _history.Setup, engine: MypyEngine, target: str, good: str, bad: str, **kw: object
) -> Ran:
    out = io.StringIO()
    report = bisect_target(
        _history.workspace(setup),
        Cache(setup.cache),
        target,
        good=good,
        bad=bad,
        repo=kw.pop("repo", setup.history.repo),  # type: ignore[arg-type]
        engine=engine,
        console=Console(file=out, width=200),
        **kw,  # type: ignore[arg-type]
    )
    return Ran(report, out.getvalue())


@pytest.fixture(scope="session")
def breaking(setup: _history.Setup, engine: MypyEngine) -> Ran:
    """Target ``old`` (vllm v0.1.0) over v0.1.0..v0.2.0: the consumer breaks at step 41."""
    return run_bisect(setup, engine, "old", "v0.1.0", "v0.2.0")


@pytest.fixture(scope="session")
def mirror(setup: _history.Setup, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mirror of the provider whose history stops at v0.2.0 (step 70)."""
    return _history.truncated(setup.history, tmp_path_factory.mktemp("mirror") / "vllm.git")


@pytest.fixture(scope="session")
def answered(setup: _history.Setup, engine: MypyEngine, mirror: Path) -> Ran:
    """Target ``new`` (vllm v0.3.0) over the mirror's v0.1.0..main: the patch's APIs land at
    steps 23 and 50; resolve_layout (step 73) lies beyond the mirror's history."""
    return run_bisect(setup, engine, "new", "v0.1.0", "main", repo=mirror)
