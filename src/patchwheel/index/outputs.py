"""build/: outputs replaced atomically (a link swapped onto a complete store), garbage-collected.

``build/<target>`` and ``build/simple`` are symbolic links into ``build/.store/``. A build writes
a complete new store directory beside the old one and then swaps the link (an atomic rename),
so readers see the old outputs or the new ones, never a mix; a killed build leaves an unlinked
store directory that the next run removes. (The locks that serialize runs are the workspace's.)
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

from patchwheel import manifest
from patchwheel.errors import BuildError
from patchwheel.index import static
from patchwheel.manifest import Manifest, path_in
from patchwheel.upstream.cache import sha256_bytes, sha256_file
from patchwheel.workspace import INDEX_NAME, Workspace

STORE = ".store"


def new_store(build_dir: Path, name: str, key: str) -> Path:
    """A fresh, empty store directory for ``name``'s next outputs."""
    store = build_dir / STORE
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{name}.{key[:16]}.{secrets.token_hex(3)}"
    path.mkdir()
    return path


def current(build_dir: Path, name: str) -> Path | None:
    """The store directory ``build/<name>`` points to, if any."""
    link = build_dir / name
    if link.is_symlink():
        target = (link.parent / link.readlink()).resolve()
        return target if target.is_dir() else None
    if link.exists():
        raise BuildError(
            f"{link} is not a patchwheel output link (a real file or directory); move it away"
        )
    return None


def activate(build_dir: Path, name: str, store_dir: Path) -> None:
    """Point ``build/<name>`` at ``store_dir`` atomically, then drop unlinked stores of ``name``."""
    link = build_dir / name
    if link.exists() and not link.is_symlink():
        raise BuildError(f"{link} is a real directory, not a patchwheel output link; move it away")
    tmp = build_dir / f".{name}.link-{secrets.token_hex(3)}"
    tmp.symlink_to(os.path.relpath(store_dir, build_dir))
    os.replace(tmp, link)
    collect(build_dir, name)


def collect(build_dir: Path, name: str) -> None:
    """Remove the store directories of ``name`` that no link points to (old or interrupted)."""
    keep = current(build_dir, name)
    for path in (build_dir / STORE).glob(f"{name}.*"):
        if path.is_dir() and (keep is None or path.resolve() != keep):
            shutil.rmtree(path, ignore_errors=True)


def place(source: Path, dest: Path) -> None:
    """Put a file into a store: a hard link when possible (same disk), else a copy."""
    try:
        os.link(source, dest)
    except OSError:
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, dest)


def add_files(build_dir: Path, name: str, files: dict[str, bytes]) -> list[Path]:
    """Add (or replace) report files at the top of ``build/<name>``, swapping its link like a
    build does: the current outputs are linked into a new store beside the new files."""
    now = current(build_dir, name)
    key = sha256_bytes(b"".join(sha256_bytes(data).encode() for data in files.values()))
    store = new_store(build_dir, name, key)
    if now is not None:
        for path in sorted(now.rglob("*")):
            rel = path.relative_to(now)
            if rel.as_posix() in files:
                continue
            if path.is_dir():
                (store / rel).mkdir(parents=True, exist_ok=True)
            else:
                (store / rel).parent.mkdir(parents=True, exist_ok=True)
                place(path, store / rel)
    for filename, data in files.items():
        (store / filename).write_bytes(data)
    activate(build_dir, name, store)
    return [build_dir / name / filename for filename in files]


def manifests(build_dir: Path) -> dict[str, Manifest]:
    """The manifest of every target currently in build/ (through its link)."""
    out: dict[str, Manifest] = {}
    if not build_dir.is_dir():
        return out
    for link in sorted(build_dir.iterdir()):
        if link.is_symlink() and link.name != INDEX_NAME and path_in(link).is_file():
            out[link.name] = manifest.read(path_in(link))
    return out


def up_to_date(build_dir: Path, name: str, key: str) -> Manifest | None:
    """The manifest of ``build/<name>`` if it was built from inputs ``key`` and is intact."""
    store = current(build_dir, name)
    if store is None or not path_in(store).is_file():
        return None
    try:
        found = manifest.read(path_in(store))
    except manifest.ManifestError:
        return None  # not one patchwheel wrote: rebuild
    if found.inputs != key:
        return None
    for wheel in found.wheels:
        path = store / "wheels" / wheel.filename
        if not path.is_file() or sha256_file(path) != wheel.sha256:
            return None
    return found


def artifacts(build_dir: Path, name: str, target: Manifest) -> list[static.Artifact]:
    """The files a target's manifest lists, as the index serves them (through its link)."""
    return [
        static.Artifact(
            path=build_dir / name / "wheels" / wheel.filename,
            project=wheel.distribution,
            sha256=wheel.sha256,
            metadata_sha256=wheel.metadata_sha256,
            requires_python=wheel.requires_python,
            size=wheel.size,
        )
        for wheel in target.wheels
    ]


def refresh_union_index(workspace: Workspace) -> None:
    """Rebuild build/simple from every target's manifest (serialized by its own lock)."""
    build_dir = workspace.build
    with workspace.locked(INDEX_NAME):
        listed = [
            artifact
            for target_name, target in manifests(build_dir).items()
            for artifact in artifacts(build_dir, target_name, target)
        ]
        key = sha256_bytes(json.dumps(sorted(str(a) for a in listed)).encode())
        now = current(build_dir, INDEX_NAME)
        if now is not None and now.name.startswith(f"{INDEX_NAME}.{key[:16]}."):
            return
        store = new_store(build_dir, INDEX_NAME, key)
        static.write_index(store, build_dir / INDEX_NAME, listed)
        activate(build_dir, INDEX_NAME, store)
