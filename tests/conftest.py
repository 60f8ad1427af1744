"""Shared fixtures: a shared download cache, tiny upstream projects, a checkout to build in."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchwheel.config.targets import default_target_name
from patchwheel.upstream.cache import Cache
from tests import support
from tests.tiers import (  # the tiers' hooks and the unit tests' network fence
    _network_fence,
    pytest_addoption,
    pytest_collection_modifyitems,
)

__all__ = [
    "_network_fence",
    "pytest_addoption",
    "pytest_collection_modifyitems",
]


@pytest.fixture(scope="session")
def shared_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One download cache for the session (``PATCHWHEEL_CACHE`` if set, e.g. CI's)."""
    env = os.environ.get("PATCHWHEEL_CACHE")
    if env:
        path = Path(env).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def shared_cache(shared_cache_dir: Path) -> Cache:
    """The session's cache object."""
    return Cache(shared_cache_dir)


@dataclass
class Checkout:
    """A patchwheel checkout made by a test: patches/, vendor/, build/ and its cache."""

    root: Path
    cache: Path
    upstream: Path

    @property
    def patches(self) -> Path:
        return self.root / "patches"

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def vendor(self) -> Path:
        return self.root / "vendor"

    def series_dir(self, target: str = "tiny", project: str = "tinyproj") -> Path:
        return self.patches / target / project

    def write_target(self, pin: str, target: str = "tiny", *, default: bool = True) -> Path:
        path = self.patches / target / "target.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            textwrap.dedent(
                f"""\
                description = "tiny test target"
                default = {"true" if default else "false"}

                [projects.tinyproj]
                build = "source"
                pin = "{pin}"
                """
            )
        )
        return path

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> support.subprocess.CompletedProcess[str]:
        return support.patchwheel(self.root, *args, cache=self.cache, env=env)


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    """A checkout whose default target pins a local git repo's tag ``v1.0``."""
    upstream = tmp_path / "upstream"
    support.make_upstream(upstream)
    root = tmp_path / "checkout"
    root.mkdir()
    co = Checkout(root=root, cache=tmp_path / "cache", upstream=upstream)
    co.write_target(f"tinyproj @ git+{upstream.as_uri()}@v1.0")
    return co


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a directory tree (symlinks kept)."""
    shutil.copytree(src, dest, symlinks=True)


@dataclass
class DefaultBuild:
    """The repository's default target, built once per session from its real patches/."""

    root: Path
    cache: Path
    target: str
    stderr: str

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def target_dir(self) -> Path:
        return self.build / self.target

    @property
    def index(self) -> Path:
        return self.build / "simple"

    def manifest(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.target_dir / "manifest.json").read_text())
        return data


@pytest.fixture(scope="session")
def default_build(tmp_path_factory: pytest.TempPathFactory, shared_cache_dir: Path) -> DefaultBuild:
    """``patchwheel build`` of the default target (real PyPI artifacts, real patches)."""
    root = tmp_path_factory.mktemp("default-build")
    copy_tree(support.REPO_ROOT / "patches", root / "patches")
    name = default_target_name(root / "patches")
    result = support.patchwheel(root, "build", cache=shared_cache_dir)
    assert result.returncode == 0, result.stderr
    return DefaultBuild(root=root, cache=shared_cache_dir, target=name, stderr=result.stderr)
