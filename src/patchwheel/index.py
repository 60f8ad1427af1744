"""The static package index: PEP 503 HTML, PEP 691 JSON, PEP 658/714 metadata files.

The index links to artifacts where they lie (no copies of 300 MB wheels). Each wheel gets a
``<wheel>.metadata`` file beside it, so pip and uv resolve without downloading the wheel.
"""

from __future__ import annotations

import html
import json
import os
import zipfile
from collections import defaultdict
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path
from urllib.parse import quote

from packaging.utils import canonicalize_name

from patchwheel.cache import sha256_bytes
from patchwheel.wheels import find_dist_info, parse_wheel_name

API_VERSION = "1.1"


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
    name = parse_wheel_name(wheel.name)
    with zipfile.ZipFile(wheel) as zf:
        dist_info = find_dist_info(zf.namelist(), name.distribution)
        metadata = zf.read(f"{dist_info}/METADATA")
    out = wheel.with_name(wheel.name + ".metadata")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(metadata)
    os.replace(tmp, out)
    headers = BytesHeaderParser().parsebytes(metadata)
    return sha256_bytes(metadata), headers.get("Requires-Python")


def write_index(staging: Path, final: Path, artifacts: list[Artifact]) -> None:
    """Write an index into ``staging`` whose links are right once it lies at ``final``."""
    by_project: dict[str, list[Artifact]] = defaultdict(list)
    for artifact in artifacts:
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
            entry["dist-info-metadata"] = {"sha256": artifact.metadata_sha256}
        if artifact.size is not None:
            entry["size"] = artifact.size
        entries.append(entry)
    data = {"meta": {"api-version": API_VERSION}, "name": project, "files": entries}
    return json.dumps(data, indent=1) + "\n"
