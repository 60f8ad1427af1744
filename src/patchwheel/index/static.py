"""The static package index: PEP 503 HTML, PEP 691 JSON, PEP 658/714 metadata files.

The index links to artifacts where they lie (no copies of 300 MB wheels). Each wheel gets a
``<wheel>.metadata`` file beside it, so pip and uv resolve without downloading the wheel.

Each page exists twice: ``index.html`` (PEP 503 + PEP 629 ``pypi:repository-version``) and
``index.json`` (PEP 691, API version 1.1: PEP 700 ``versions`` and ``size``). A static server
serves the HTML; ``patchwheel serve`` negotiates the JSON. Metadata links follow PEP 714: HTML
carries ``data-core-metadata`` and the legacy ``data-dist-info-metadata`` (same value); JSON
carries only ``core-metadata``, because pip 22.3 to 23.1 fail hard on a JSON
``dist-info-metadata`` key (the reason PEP 714 renamed it).
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from patchwheel import atomic
from patchwheel.errors import BuildError
from patchwheel.upstream.cache import sha256_bytes
from patchwheel.wheels import metadata as wheel_metadata

API_VERSION = "1.1"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPE = "application/vnd.pypi.simple.v1+html"


@dataclass(frozen=True)
class Artifact:
    """A file the index serves: where it will lie, its project and hashes."""

    path: Path  # final location (through the build/<target> link)
    project: str
    sha256: str
    metadata_sha256: str | None = None
    requires_python: str | None = None
    size: int | None = None


def write_metadata_file(wheel: Path) -> tuple[str, str | None]:
    """Write ``<wheel>.metadata`` (PEP 658); return its sha256 and the Requires-Python."""
    metadata = wheel_metadata.read(wheel)
    atomic.write_bytes(wheel.with_name(wheel.name + ".metadata"), metadata.raw)
    return sha256_bytes(metadata.raw), metadata.requires_python


def write_index(staging: Path, final: Path, artifacts: list[Artifact]) -> None:
    """Write an index into ``staging`` whose links are right once it lies at ``final``."""
    by_project: dict[str, list[Artifact]] = defaultdict(list)
    for artifact in _unique(artifacts):
        by_project[canonicalize_name(artifact.project)].append(artifact)
    projects = sorted(by_project)
    staging.mkdir(parents=True, exist_ok=True)
    _write(staging / "index.html", _root_html(projects))
    _write(staging / "index.json", _root_json(projects))
    for project in projects:
        files = sorted(by_project[project], key=lambda a: a.path.name)
        page_dir = staging / project
        page_dir.mkdir()
        hrefs = [quote(os.path.relpath(a.path, final / project)) for a in files]
        _write(page_dir / "index.html", _project_html(project, files, hrefs))
        _write(page_dir / "index.json", _project_json(project, files, hrefs))


def _unique(artifacts: list[Artifact]) -> list[Artifact]:
    """One entry per file name: the same file in two targets is listed once.

    Two different files under one name would make the index serve whichever a client picks,
    so that is refused (a local label must change whenever the bytes do).
    """
    seen: dict[str, Artifact] = {}
    for artifact in artifacts:
        first = seen.setdefault(artifact.path.name, artifact)
        if first.sha256 != artifact.sha256:
            raise BuildError(
                f"two different files are named {artifact.path.name}: {first.path} "
                f"(sha256 {first.sha256}) and {artifact.path} (sha256 {artifact.sha256}); "
                "the index cannot serve both. Rebuild one of the targets so its wheel gets a "
                "new local label, or remove the stale target from build/"
            )
    return list(seen.values())


def file_version(filename: str) -> Version | None:
    """The version a wheel or sdist file name carries (None for other files)."""
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None


def _write(path: Path, text: str) -> None:
    path.write_text(text, "utf-8")


def _root_html(projects: list[str]) -> str:
    links = "\n".join(f'    <a href="{p}/">{p}</a><br/>' for p in projects)
    return (
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        f'    <meta name="pypi:repository-version" content="{API_VERSION}">\n'
        "    <title>patchwheel index</title>\n  </head>\n  <body>\n"
        f"{links}\n  </body>\n</html>\n"
    )


def _root_json(projects: list[str]) -> str:
    data = {"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in projects]}
    return json.dumps(data, indent=1) + "\n"


def _project_html(project: str, files: list[Artifact], hrefs: list[str]) -> str:
    anchors = []
    for artifact, href in zip(files, hrefs, strict=True):
        attrs = f'href="{href}#sha256={artifact.sha256}"'
        if artifact.requires_python:
            attrs += f' data-requires-python="{html.escape(artifact.requires_python)}"'
        if artifact.metadata_sha256:
            meta = f"sha256={artifact.metadata_sha256}"
            attrs += f' data-dist-info-metadata="{meta}" data-core-metadata="{meta}"'
        anchors.append(f"    <a {attrs}>{html.escape(artifact.path.name)}</a><br/>")
    return (
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        f'    <meta name="pypi:repository-version" content="{API_VERSION}">\n'
        f"    <title>Links for {project}</title>\n  </head>\n  <body>\n"
        f"    <h1>Links for {project}</h1>\n" + "\n".join(anchors) + "\n  </body>\n</html>\n"
    )


def _project_json(project: str, files: list[Artifact], hrefs: list[str]) -> str:
    entries = []
    for artifact, href in zip(files, hrefs, strict=True):
        entry: dict[str, object] = {
            "filename": artifact.path.name,
            "url": href,
            "hashes": {"sha256": artifact.sha256},
        }
        if artifact.requires_python:
            entry["requires-python"] = artifact.requires_python
        if artifact.metadata_sha256:
            entry["core-metadata"] = {"sha256": artifact.metadata_sha256}
        size = artifact.size if artifact.size is not None else _size(artifact.path)
        if size is not None:
            entry["size"] = size
        entries.append(entry)
    versions = {v for a in files if (v := file_version(a.path.name)) is not None}
    data = {
        "meta": {"api-version": API_VERSION},
        "name": project,
        "versions": [str(v) for v in sorted(versions)],
        "files": entries,
    }
    return json.dumps(data, indent=1) + "\n"


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None
