"""Builders of real test inputs: git repos, sdists, patches, wheels, a local package index."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import venv
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import git
import tomli_w

from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import load_target
from patchwheel.patching.series import resolve

AUTHOR = ("Test Author", "author@example.com")
REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "tests" / "data"
# `python3 -m pip list --format=freeze` of the H200 image: torch 2.11.0, transformers 5.17.0.
H200_FREEZE = DATA / "h200-freeze.txt"
# The Accept header pip sends to an index (PEP 691).
PIP_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
    "text/html; q=0.01"
)

CORE_PY = '''\
"""Core of tinyproj."""


def greet(name):
    """Say hello."""
    return "hello " + name


def add(a, b):
    """Add two numbers."""
    return a + b


def scale(values, factor):
    """Multiply every value."""
    return [v * factor for v in values]


def describe():
    """What this module is."""
    return "tinyproj core"


def version_tuple():
    """The version as a tuple."""
    return (1, 0)
'''


def git_env() -> dict[str, str]:
    """A git environment independent of the user's config."""
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
        "GIT_AUTHOR_DATE": "1700000000 +0000",
        "GIT_COMMITTER_DATE": "1700000000 +0000",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }


def run_git(repo: Path, *args: str) -> str:
    """Run git in a repo and return its stdout."""
    return subprocess.run(
        ["git", *args], cwd=repo, env=git_env(), check=True, capture_output=True, text=True
    ).stdout.strip()


def make_upstream(path: Path, name: str = "tinyproj", version: str = "1.0") -> git.Repo:
    """A real git repo of a small pure-Python project, tagged ``v<version>``."""
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "{version}"
            requires-python = ">=3.8"

            [tool.setuptools.packages.find]
            where = ["src"]
            """
        )
    )
    pkg = path / "src" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f'"""{name}."""\n\n__version__ = "{version}"\n')
    (pkg / "core.py").write_text(CORE_PY)
    run_git(path, "init", "-q", "-b", "main")
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "initial")
    run_git(path, "tag", f"v{version}")
    return git.Repo(path)


def commit_file(repo: Path, rel: str, text: str, message: str) -> str:
    """Write one file, commit it, return the commit id."""
    target = repo / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", message)
    return run_git(repo, "rev-parse", "HEAD")


DEP3 = "Origin: test\nForwarded: not-needed\nDrop-When: never\n"


def format_patches(repo: Path, base: str, out_dir: Path) -> list[str]:
    """``git format-patch`` the commits after ``base`` into ``out_dir``; write ``series``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = run_git(
        repo, "format-patch", "--zero-commit", "--no-signature", "-o", str(out_dir), f"{base}..HEAD"
    ).splitlines()
    files = [Path(n).name for n in names]
    (out_dir / "series").write_text("# test series\n" + "\n".join(files) + "\n")
    return files


def edit_and_commit(
    repo: Path, rel: str, edit: Callable[[str], str], subject: str, body: str = DEP3
) -> str:
    """Apply a text edit to a file and commit it with a DEP-3 message."""
    target = repo / rel
    text = target.read_text() if target.exists() else ""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(edit(text))
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", f"{subject}\n\n{body}")
    return run_git(repo, "rev-parse", "HEAD")


def make_sdist(src: Path, out_dir: Path, name: str, version: str) -> Path:
    """An sdist tarball of a tree (top directory ``name-version``), deterministic."""
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / f"{name}-{version}.tar.gz"
    top = f"{name}-{version}"
    with tarfile.open(archive, "w:gz") as tar:
        for file in sorted(p for p in src.rglob("*") if p.is_file() and ".git" not in p.parts):
            data = file.read_bytes()
            info = tarfile.TarInfo(f"{top}/{file.relative_to(src).as_posix()}")
            info.size = len(data)
            info.mtime = 1700000000
            info.uid = 1001
            info.gid = 1001
            tar.addfile(info, io.BytesIO(data))
        pkg_info = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        info = tarfile.TarInfo(f"{top}/PKG-INFO")
        info.size = len(pkg_info)
        info.mtime = 1700000000
        tar.addfile(info, io.BytesIO(pkg_info))
    return archive


def sha256(path: Path) -> str:
    """The hex sha256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_index(index_dir: Path, files: list[Path]) -> str:
    """A PEP 503 index over ``files`` (grouped by project); return its file:// URL."""
    by_project: dict[str, list[Path]] = {}
    for file in files:
        project = file.name.split("-")[0].replace("_", "-").lower()
        by_project.setdefault(project, []).append(file)
    for project, items in by_project.items():
        page = index_dir / project
        page.mkdir(parents=True, exist_ok=True)
        links = "\n".join(
            f'<a href="{f.as_uri()}#sha256={sha256(f)}">{f.name}</a><br/>' for f in items
        )
        (page / "index.html").write_text(f"<html><body>\n{links}\n</body></html>\n")
    return index_dir.as_uri() + "/"


def make_wheel(
    out_dir: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    tag: str = "py3-none-any",
    metadata: tuple[str, ...] = (),
) -> Path:
    """A valid wheel with the given package files (RECORD and WHEEL included); ``metadata``:
    more METADATA header lines (``Requires-Dist: …``, ``Provides-Extra: …``)."""

    out_dir.mkdir(parents=True, exist_ok=True)
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    members = dict(files)
    members[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.8\n"
        + "".join(f"{line}\n" for line in metadata)
        + "\nA test wheel.\n"
    ).encode()
    members[f"{dist}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    ).encode()
    rows = []
    for member, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{member},sha256={digest},{len(data)}")
    rows.append(f"{dist}/RECORD,,")
    members[f"{dist}/RECORD"] = ("\n".join(rows) + "\n").encode()
    path = out_dir / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            info = zipfile.ZipInfo(member, date_time=(2024, 1, 2, 3, 4, 6))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return path


def fresh_venv(path: Path) -> Path:
    """A new virtual environment with pip; return its python."""
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


def pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run pip in a venv (no version check)."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run(
        [str(python), "-m", "pip", *args], capture_output=True, text=True, env=env, check=False
    )


def patchwheel(
    root: Path, *args: str, cache: Path, env: dict[str, str] | None = None, timeout: float = 1200
) -> subprocess.CompletedProcess[str]:
    """Run the real ``patchwheel`` command on a checkout root."""
    full_env = {**os.environ, "PATCHWHEEL_CACHE": str(cache), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "patchwheel", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


@dataclass
class BuiltTiny:
    """A checkout whose target ``tiny`` the test locked and built: its root, its cache and the
    environment naming the upstream index it locked from."""

    root: Path
    cache: Path
    index_env: dict[str, str]

    @classmethod
    def lock_and_build(cls, root: Path, cache: Path, index_env: dict[str, str]) -> Self:
        """``patchwheel lock`` then ``build --no-audit`` of ``root``; both must pass."""
        for args in (("lock",), ("build", "--no-audit")):
            result = patchwheel(root, *args, cache=cache, env=index_env)
            assert result.returncode == 0, result.stderr
        return cls(root, cache, index_env)

    @property
    def target_dir(self) -> Path:
        return self.root / "build" / "tiny"

    def manifest(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.target_dir / "manifest.json").read_text())
        return data


def committed_series(target: str, project: str = "speculators") -> list[Any]:
    """The patches a committed target applies to a project: its own series or its pool,
    resolved by the gates (patches/README.md)."""
    loaded = load_target(REPO_ROOT / "patches", target)
    return list(resolve(loaded.project(project), locked_pins(loaded)).patches)


def committed_series_dir(target: str, project: str = "speculators") -> Path:
    """Where a committed target's series of a project lives (its own folder or its pool)."""
    return load_target(REPO_ROOT / "patches", target).project(project).series_dir


def gpu_tables(target: str) -> str:
    """The ``gpu-archs`` / ``[gpu-specific."…"]`` tables of a committed target, as TOML text to
    append to a test's own target.toml that builds the same vLLM CUDA wheel: the build checks
    every CUDA module against the GPUs a target requires, and upstream builds some modules for
    fewer GPUs (FlashAttention 3, FlashMLA, …), which the committed targets declare."""
    data = tomllib.loads((REPO_ROOT / "patches" / target / "target.toml").read_text())
    tables = {k: data[k] for k in ("gpu-archs", "gpu-specific") if k in data}
    if not tables:
        raise AssertionError(f"patches/{target}/target.toml declares no GPU tables")
    return "\n" + tomli_w.dumps(tables)
