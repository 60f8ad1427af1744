"""Self-contained builders for the hardening tests (issue 11): black-box, through the CLI.

Nothing here imports patchwheel's modules (they are being moved into packages): the tests
build real inputs — git repositories, sdists, wheels, a PEP 503 index on disk — run
``python -m patchwheel`` in a subprocess with a private ``PATCHWHEEL_CACHE``, and judge the
exit status, the output and the filesystem.
"""

from __future__ import annotations

import base64
import difflib
import gzip
import hashlib
import html.parser
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag

AUTHOR = ("Test Author", "author@example.com")
EPOCH = 1700000000
DEP3 = "Origin: test\nForwarded: not-needed\nDrop-When: never\n"
TARGET = "tiny"

CORE_PY = '''\
"""Core of {name}."""


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
    return "{name} core"


def version_tuple():
    """The version as a tuple."""
    return (1, 0)
'''


# --------------------------------------------------------------------------- git


def git_env(date: int = EPOCH) -> dict[str, str]:
    """A git environment independent of the user's configuration and of the clock."""
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
        "GIT_AUTHOR_DATE": f"{date} +0000",
        "GIT_COMMITTER_DATE": f"{date} +0000",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }


def git(repo: Path, *args: str, date: int = EPOCH) -> str:
    """Run git in ``repo``; return its stripped stdout."""
    return subprocess.run(
        ["git", *args], cwd=repo, env=git_env(date), check=True, capture_output=True, text=True
    ).stdout.strip()


def project_files(name: str, version: str, *, layout: str = "src") -> dict[str, str]:
    """The files of a small pure-Python setuptools project (``src`` or ``flat`` layout)."""
    pkg = f"src/{name}" if layout == "src" else name
    find = '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n' if layout == "src" else ""
    return {
        "pyproject.toml": textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "{version}"
            requires-python = ">=3.8"
            """
        )
        + find,
        f"{pkg}/__init__.py": f'"""{name}."""\n\n__version__ = "{version}"\n',
        f"{pkg}/core.py": CORE_PY.format(name=name),
    }


def make_git_project(
    path: Path, name: str = "tinyproj", version: str = "1.0", *, layout: str = "src"
) -> Path:
    """A real git repository of a small project, its first commit tagged ``v<version>``."""
    path.mkdir(parents=True)
    for rel, text in project_files(name, version, layout=layout).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    git(path, "tag", f"v{version}")
    return path


def commit_edit(
    repo: Path,
    rel: str,
    edit: Callable[[str], str],
    subject: str,
    body: str = DEP3,
    *,
    date: int = EPOCH,
) -> str:
    """Edit one file (created if missing), commit it with a DEP-3 message; return the commit."""
    target = repo / rel
    text = target.read_text() if target.exists() else ""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(edit(text))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"{subject}\n\n{body}", date=date)
    return git(repo, "rev-parse", "HEAD")


def format_patches(repo: Path, base: str, out_dir: Path, *, head: str = "HEAD") -> list[str]:
    """``git format-patch`` the commits ``base..head`` into ``out_dir`` and write ``series``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    listed = git(
        repo,
        "format-patch",
        "--zero-commit",
        "--no-signature",
        "-o",
        str(out_dir),
        f"{base}..{head}",
    )
    names = [Path(line).name for line in listed.splitlines()]
    write_series(out_dir, names)
    return names


def write_series(series_dir: Path, names: Iterable[str]) -> None:
    """Write a series file naming ``names`` in order."""
    series_dir.mkdir(parents=True, exist_ok=True)
    (series_dir / "series").write_text(
        "# hardening test series\n" + "".join(f"{n}\n" for n in names)
    )


# --------------------------------------------------------------------------- artifacts


def sha256(path: Path) -> str:
    """The hex sha256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_sdist(files: dict[str, str], out_dir: Path, name: str, version: str) -> Path:
    """A byte-for-byte reproducible sdist (top directory ``name-version``, owners 1001)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / f"{name}-{version}.tar.gz"
    top = f"{name}-{version}"
    members = dict(files)
    members["PKG-INFO"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    with (
        archive.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for rel in sorted(members):
            data = members[rel].encode()
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(data)
            info.mtime = EPOCH
            info.uid = info.gid = 1001
            tar.addfile(info, io.BytesIO(data))
    return archive


def make_wheel(out_dir: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A valid ``py3-none-any`` wheel holding ``files`` (METADATA, WHEEL and RECORD added)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    members = {k: v.encode() for k, v in files.items()}
    members[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.8\n\n"
    ).encode()
    members[f"{dist}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    rows = []
    for member, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{member},sha256={digest},{len(data)}")
    rows.append(f"{dist}/RECORD,,")
    members[f"{dist}/RECORD"] = ("\n".join(rows) + "\n").encode()
    path = out_dir / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            info = zipfile.ZipInfo(member, date_time=(2023, 11, 14, 22, 13, 20))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return path


def write_index(index_dir: Path, files: list[Path]) -> str:
    """A PEP 503 index on disk over ``files``; return its ``file://`` URL."""
    by_project: dict[str, list[Path]] = {}
    for file in files:
        project = re.split(r"-\d", file.name, maxsplit=1)[0].replace("_", "-").lower()
        by_project.setdefault(project, []).append(file)
    for project, items in by_project.items():
        page = index_dir / project
        page.mkdir(parents=True, exist_ok=True)
        links = "\n".join(
            f'<a href="{f.as_uri()}#sha256={sha256(f)}">{f.name}</a><br/>' for f in items
        )
        (page / "index.html").write_text(f"<html><body>\n{links}\n</body></html>\n")
    return index_dir.as_uri() + "/"


# --------------------------------------------------------------------------- running


def patchwheel(
    root: Path,
    *args: str,
    cache: Path,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    prefix: Iterable[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``python [prefix…] -m patchwheel --root ROOT ARGS`` with a private cache."""
    full_env = {
        **os.environ,
        "PATCHWHEEL_CACHE": str(cache),
        "COLUMNS": "400",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, *prefix, "-m", "patchwheel", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def flat(text: str) -> str:
    """Output with every run of whitespace made one space (messages may wrap)."""
    return " ".join(text.split())


def raised(out: str) -> str | None:
    """The exception a traceback in ``out`` ends with (and git's stderr, if it quotes one)."""
    if "Traceback (most recent call last):" not in out:
        return None
    block = out.rsplit("Traceback (most recent call last):", 1)[1].splitlines()
    exception = next((line for line in block if line and not line[0].isspace()), "?")
    stderr = next((line.strip() for line in block if line.strip().startswith("stderr:")), "")
    return f"{exception} {stderr}".strip()


def refusal_problems(result: subprocess.CompletedProcess[str], *needles: str) -> list[str]:
    """What keeps a run from being a clear refusal: exit 0, a traceback, an unnamed input."""
    out = result.stdout + result.stderr
    problems = []
    if result.returncode == 0:
        problems.append("exit status 0 (accepted)")
    exception = raised(out)
    if exception:
        problems.append(f"a Python traceback ({exception[:300]})")
    text = flat(out)
    problems += [f"the output does not name {needle!r}" for needle in needles if needle not in text]
    return problems


def tail(result: subprocess.CompletedProcess[str], chars: int = 3000) -> str:
    """The end of a run's output, for assertion messages."""
    return (result.stdout + result.stderr)[-chars:]


def assert_refused(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """A run that stopped with a clear error: status != 0, no traceback, ``needles`` named."""
    problems = refusal_problems(result, *needles)
    assert not problems, "; ".join(problems) + "\n" + tail(result)
    return flat(result.stdout + result.stderr)


def failure(result: subprocess.CompletedProcess[str]) -> str:
    """One line saying why a run failed: its exception, else its last ``error:`` line."""
    out = result.stdout + result.stderr
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    why = raised(out) or (errors[-1] if errors else "no error line")
    return f"exit status {result.returncode}: {why}"


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    """A run that succeeded."""
    assert result.returncode == 0, failure(result) + "\n" + tail(result, 4000)


def snapshot(path: Path, *, skip: tuple[str, ...] = (".locks",)) -> dict[str, str]:
    """Every entry under ``path``: links as their target, files as their sha256, dirs marked."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for entry in sorted(path.rglob("*")):
        rel = entry.relative_to(path).as_posix()
        if rel.split("/")[0] in skip:
            continue
        if entry.is_symlink():
            out[rel] = "-> " + os.readlink(entry)
        elif entry.is_file():
            out[rel] = sha256(entry)
        elif entry.is_dir():
            out[rel] = "dir"
    return out


# --------------------------------------------------------------------------- index checks


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def index_problems(simple: Path) -> list[str]:
    """What is wrong with a PEP 503/691 index on disk: links to missing or changed files."""
    problems: list[str] = []
    if not simple.exists():
        return problems
    for page in sorted(simple.glob("*/index.html")):
        parser = _Links()
        parser.feed(page.read_text("utf-8"))
        for href in parser.hrefs:
            url, fragment = urldefrag(href)
            file = Path(os.path.normpath(page.parent / unquote(url)))  # as a URL resolves
            if not file.is_file():
                problems.append(f"{page.relative_to(simple.parent)} lists {url}: no such file")
                continue
            if fragment.startswith("sha256=") and sha256(file) != fragment[7:]:
                problems.append(f"{page.relative_to(simple.parent)} lists {url}: sha256 differs")
    for page in sorted(simple.glob("*/index.json")):
        data = json.loads(page.read_text("utf-8"))
        for entry in data.get("files", []):
            file = Path(os.path.normpath(page.parent / unquote(entry["url"])))
            if not file.is_file():
                problems.append(f"{page.relative_to(simple.parent)} lists {entry['url']}: missing")
            elif sha256(file) != entry.get("hashes", {}).get("sha256"):
                problems.append(f"{page.relative_to(simple.parent)} lists {entry['url']}: sha256")
    return problems


def manifest_problems(target_dir: Path) -> list[str]:
    """Wheels the target's manifest lists that are missing or differ."""
    manifest = target_dir / "manifest.json"
    if not manifest.is_file():
        return []
    problems = []
    for wheel in json.loads(manifest.read_text("utf-8")).get("wheels", []):
        path = target_dir / "wheels" / wheel["filename"]
        if not path.is_file():
            problems.append(f"manifest lists {wheel['filename']}: no such file")
        elif sha256(path) != wheel["sha256"]:
            problems.append(f"manifest lists {wheel['filename']}: sha256 differs")
    return problems


# --------------------------------------------------------------------------- checkouts


@dataclass
class Workspace:
    """A patchwheel checkout made by a test: patches/, vendor/, build/, a private cache."""

    root: Path
    cache: Path
    env: dict[str, str] = field(default_factory=dict)
    upstream: Path | None = None  # the git repository a git pin points to
    files: Path | None = None  # where artifacts of the local index lie

    @property
    def patches(self) -> Path:
        return self.root / "patches"

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def vendor(self) -> Path:
        return self.root / "vendor"

    @property
    def lock_path(self) -> Path:
        return self.patches / TARGET / "target.lock"

    def series_dir(self, project: str = "tinyproj") -> Path:
        return self.patches / TARGET / project

    def vendor_dir(self, project: str = "tinyproj") -> Path:
        return self.vendor / TARGET / project

    def write_target(self, text: str) -> None:
        path = self.patches / TARGET / "target.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """``patchwheel ARGS`` on this checkout (its cache, its index)."""
        return patchwheel(
            self.root, *args, cache=self.cache, env={**self.env, **(env or {})}, timeout=timeout
        )

    def build_ok(self) -> subprocess.CompletedProcess[str]:
        result = self.run("build", "--no-audit")
        assert_ok(result)
        return result

    def manifest(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.build / TARGET / "manifest.json").read_text())
        return data

    def wheel_files(self) -> list[Path]:
        return sorted((self.build / TARGET / "wheels").glob("*.whl"))


def sdist_workspace(
    tmp_path: Path, *, name: str = "tinydep", cache: Path | None = None
) -> Workspace:
    """Target ``tiny``: one source project pinned ``NAME==1.0`` from a local index (an sdist)."""
    files = tmp_path / "files"
    src = project_files(name, "1.0")
    sdist = make_sdist(src, files, name, "1.0")
    index = write_index(tmp_path / "index", [sdist])
    ws = Workspace(
        root=tmp_path / "checkout",
        cache=cache or tmp_path / "home" / ".cache" / "patchwheel",
        env={"PATCHWHEEL_INDEX_URL": index},
        files=files,
    )
    ws.root.mkdir(parents=True)
    ws.write_target(
        f"""\
        description = "hardening: an sdist pin"
        default = true

        [projects.{name}]
        build = "source"
        pin = "{name}==1.0"
        """
    )
    return ws


def git_workspace(tmp_path: Path) -> Workspace:
    """Target ``tiny``: one source project pinned to tag ``v1.0`` of a local git repository."""
    upstream = make_git_project(tmp_path / "upstream")
    ws = Workspace(
        root=tmp_path / "checkout",
        cache=tmp_path / "home" / ".cache" / "patchwheel",
        upstream=upstream,
    )
    ws.root.mkdir(parents=True)
    ws.write_target(
        f"""\
        description = "hardening: a git pin"
        default = true

        [projects.tinyproj]
        build = "source"
        pin = "tinyproj @ git+{upstream.as_uri()}@v1.0"
        """
    )
    return ws


def overlay_workspace(tmp_path: Path, *, with_sdist_dep: bool = False) -> Workspace:
    """Target ``tiny``: ``tinyproj`` as an overlay build (no PEP 517 build, fast).

    The sources are tag ``v1.0`` of a local git repository (flat layout); the variant ``plain``
    is ``tinyproj==1.0``, a wheel of the same files from a local index. With
    ``with_sdist_dep``, a second project ``tinydep`` (an sdist, empty series) is served unchanged.
    """
    upstream = make_git_project(tmp_path / "upstream", layout="flat")
    files = tmp_path / "files"
    wheel_files = {
        k: v
        for k, v in project_files("tinyproj", "1.0", layout="flat").items()
        if k != "pyproject.toml"
    }
    artifacts = [make_wheel(files, "tinyproj", "1.0", wheel_files)]
    if with_sdist_dep:
        artifacts.append(make_sdist(project_files("tinydep", "1.0"), files, "tinydep", "1.0"))
    index = write_index(tmp_path / "index", artifacts)
    ws = Workspace(
        root=tmp_path / "checkout",
        cache=tmp_path / "home" / ".cache" / "patchwheel",
        env={"PATCHWHEEL_INDEX_URL": index},
        upstream=upstream,
        files=files,
    )
    ws.root.mkdir(parents=True)
    dep = '\n[projects.tinydep]\nbuild = "source"\npin = "tinydep==1.0"\n' if with_sdist_dep else ""
    ws.write_target(
        f"""\
        description = "hardening: an overlay build"
        default = true

        [projects.tinyproj]
        build = "overlay"
        pin = "tinyproj @ git+{upstream.as_uri()}@v1.0"

        [projects.tinyproj.variants.plain]
        pin = "tinyproj==1.0"
        """
        + dep
    )
    return ws


def add_overlay_patches(ws: Workspace, count: int = 3) -> list[str]:
    """Up to three patches of ``tinyproj/core.py`` (flat layout) as the series; return names."""
    assert ws.upstream is not None
    repo = ws.upstream
    base = git(repo, "rev-parse", "v1.0")
    edits: list[tuple[str, Callable[[str], str], str]] = [
        ("tinyproj/core.py", lambda t: t.replace('"hello "', '"hi "'), "core: say hi"),
        (
            "tinyproj/extra.py",
            lambda t: '"""Added by a patch."""\n\nPATCHED = True\n',
            "extra: add a module",
        ),
        (
            "tinyproj/core.py",
            lambda t: t.replace('"""Add two numbers."""', '"""Add two numbers (patched)."""'),
            "core: document add",
        ),
    ]
    for rel, edit, subject in edits[:count]:
        commit_edit(repo, rel, edit, subject)
    names = format_patches(repo, base, ws.series_dir())
    git(repo, "checkout", "-q", "main")
    return names


# --------------------------------------------------------------------------- vendor trees


def vendor_state(vendor_dir: Path) -> dict[str, object]:
    """HEAD, the porcelain status and the subjects of ``upstream..HEAD`` of a vendor tree."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--ignored"],
        cwd=vendor_dir,
        env=git_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        "head": git(vendor_dir, "rev-parse", "HEAD"),
        "status": status.splitlines(),
        "subjects": git(
            vendor_dir, "log", "--reverse", "--format=%s", "upstream..HEAD"
        ).splitlines(),
    }


def vendor_files(vendor_dir: Path) -> dict[str, str]:
    """The work tree of a vendor tree (no .git), file by file."""
    return {
        rel: digest
        for rel, digest in snapshot(vendor_dir, skip=(".git",)).items()
        if digest != "dir"
    }


def wheel_members(path: Path) -> dict[str, bytes]:
    """A wheel's members and their bytes."""
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


# --------------------------------------------------------------------------- hand-made patches


def patch_text(
    subject: str,
    diffs: dict[str, tuple[str | None, str | None]],
    *,
    body: str = DEP3,
    date: str | None = "Tue, 14 Nov 2023 22:13:20 +0000",
) -> str:
    """A ``git format-patch``-shaped file of unified diffs (old None: a new file)."""
    head = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    head += f"From: {AUTHOR[0]} <{AUTHOR[1]}>\n"
    if date is not None:
        head += f"Date: {date}\n"
    out = [head, f"Subject: [PATCH] {subject}\n\n", body, "---\n"]
    for path, (old, new) in diffs.items():
        out.append(f"diff --git a/{path} b/{path}\n")
        if old is None:
            out.append("new file mode 100644\n")
        out.extend(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                (new or "").splitlines(keepends=True),
                "/dev/null" if old is None else f"a/{path}",
                "/dev/null" if new is None else f"b/{path}",
            )
        )
    return "".join(out)


def copy_workspace(template: Workspace, base: Path, tmp_path: Path) -> Workspace:
    """A private copy of a built workspace that lives under ``base`` (its own cache and build).

    Everything under ``base`` is copied to ``tmp_path`` at the same relative paths; the copy
    still reads the template's upstream repository and index (nothing writes to those).
    """
    for child in base.iterdir():
        if child.name not in ("upstream", "files", "index"):
            shutil.copytree(child, tmp_path / child.name, symlinks=True)
    return Workspace(
        root=tmp_path / template.root.relative_to(base),
        cache=tmp_path / template.cache.relative_to(base),
        env=dict(template.env),
        upstream=template.upstream,
        files=template.files,
    )


# --------------------------------------------------------------------------- kill -9 at event N

KILL_RUNNER = r'''
"""Run a module (``-m NAME ARGS``) and SIGKILL this process group just before its N-th
filesystem mutation (seen through ``sys.addaudithook``), or before the first one whose site
contains HARDENING_KILL_SITE; N = 0 and no site only records the events."""
import os, runpy, signal, sys

os.setpgid(0, 0)  # our own process group: the kill takes git children with it, nothing else
KILL_AT = int(os.environ.get("HARDENING_KILL_AT", "0"))
KILL_SITE = os.environ.get("HARDENING_KILL_SITE", "")
LOG = os.open(os.environ["HARDENING_EVENT_LOG"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
EVENTS = {
    "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
    "os.truncate", "os.chmod", "os.utime", "shutil.rmtree", "shutil.copyfile",
    "shutil.copytree", "shutil.move", "subprocess.Popen", "os.posix_spawn",
    "tempfile.mkstemp", "tempfile.mkdtemp",
}
count = 0


def describe(event, args):
    if event == "subprocess.Popen":
        argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        return "subprocess " + " ".join(str(a) for a in argv[:3])
    paths = [str(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
    return event + " " + " ".join(paths)


def site(event, args):
    """Where in patchwheel the mutation comes from: its frames (module:function:line)."""
    frames = []
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("patchwheel"):
            frames.append(f"{name}:{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    what = event
    if event == "subprocess.Popen":
        argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        what += " " + " ".join(str(a) for a in argv[:2])
    return what + " @ " + " < ".join(frames)


def hook(event, args):
    global count
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int) or not flags & WRITE:
            return
        if str(path).startswith(("/dev/", "/proc/")):
            return
    elif event not in EVENTS:
        return
    count += 1
    description = describe(event, args)[:300].replace("\n", " ").replace("\t", " ")
    where = site(event, args).replace("\n", " ")
    line = f"{count}\t{description}\t{where}" + "\n"
    os.write(LOG, line.encode("utf-8", "replace"))
    if count == KILL_AT or (KILL_SITE and KILL_SITE in where):
        os.killpg(0, signal.SIGKILL)


assert sys.argv[1] == "-m", sys.argv
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
sys.addaudithook(hook)
runpy.run_module(module, run_name="__main__", alter_sys=True)
'''


def run_killed(
    ws: Workspace, kill_at: int, log: Path, *args: str, kill_site: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``patchwheel ARGS`` killed just before its ``kill_at``-th mutation (0: never), or
    before the first mutation whose site contains ``kill_site`` (when given).

    Returns the run and the mutations it logged (``"N\\tdescription\\tsite"``, the site being
    the event and the patchwheel frames it came from), the last being the one it was killed
    before.
    """
    runner = log.with_suffix(".runner.py")
    runner.write_text(KILL_RUNNER)
    env = {"HARDENING_KILL_AT": str(kill_at), "HARDENING_EVENT_LOG": str(log)}
    result = patchwheel(
        ws.root,
        *args,
        cache=ws.cache,
        env={**ws.env, **env, "HARDENING_KILL_SITE": kill_site},
        prefix=[str(runner)],
    )
    events = log.read_text("utf-8").splitlines() if log.exists() else []
    return result, events
