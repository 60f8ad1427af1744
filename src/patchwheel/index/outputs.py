"""build/: outputs replaced atomically (a link swapped onto a complete store), garbage-collected.

``build/<target>`` and ``build/simple`` are symbolic links into ``build/.store/``. A build writes
a complete new store directory beside the old one and then swaps the link (an atomic rename),
so readers see the old outputs or the new ones, never a mix.

``build/simple`` lists every target's files through its link (``../../<target>/wheels/…``),
so the order of a swap matters (:func:`activate`, under the union index's lock): the files
the union index lists for the target are first hard-linked into the new store too, then the
target's link is swapped, then the union index is rewritten and swapped, and only then are
the files nothing lists any more removed and the old stores collected. At every moment —
a kill -9 included — each entry of ``build/simple``, ``build/<target>/simple`` and the
manifest names a file that exists. What a killed run leaves (an unlinked store, a temp link,
a carried file) is removed by the next run of that target. (The locks are the workspace's.)
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from pathlib import Path, PurePosixPath

from patchwheel import manifest
from patchwheel.errors import BuildError
from patchwheel.index import static
from patchwheel.manifest import Manifest, path_in
from patchwheel.upstream.cache import sha256_bytes, sha256_file
from patchwheel.workspace import INDEX_NAME, Workspace, build_lock, check_name

STORE = ".store"


def new_store(build_dir: Path, name: str, key: str) -> Path:
    """A fresh, empty store directory for ``name``'s next outputs."""
    check_name(name, "output")
    store = build_dir / STORE
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{name}.{key[:16]}.{secrets.token_hex(3)}"
    path.mkdir()
    return path


def current(build_dir: Path, name: str) -> Path | None:
    """The store directory ``build/<name>`` points to, if any."""
    link = build_dir / check_name(name, "output")
    if link.is_symlink():
        target = (link.parent / link.readlink()).resolve()
        return target if target.is_dir() else None
    if link.exists():
        raise BuildError(
            f"{link} is not a patchwheel output link (a real file or directory); move it away"
        )
    return None


def activate(build_dir: Path, name: str, store_dir: Path) -> None:
    """Make ``store_dir`` the outputs of ``name``: swap its link, refresh the union index.

    Under the union index's lock, in the order that keeps every listed file in existence:
    carry the files the old store holds (which build/simple may list) into the new store,
    swap ``build/<name>``, rewrite and swap ``build/simple``, drop what nothing lists any
    more, then collect the stores no link points to.
    """
    link = build_dir / name
    if link.exists() and not link.is_symlink():
        raise BuildError(f"{link} is a real directory, not a patchwheel output link; move it away")
    with build_lock(build_dir, INDEX_NAME):
        old = current(build_dir, name)
        if old is not None and old != store_dir.resolve():
            _carry_over(old, store_dir)
        _swap(build_dir, name, store_dir)
        _settle(build_dir, name)


def settle(build_dir: Path, name: str) -> None:
    """Bring build/simple up to date with every target's link, then tidy after ``name``.

    What an up-to-date build does: after a killed run it also removes what that run left
    (unlinked stores, temp links, carried files).
    """
    with build_lock(build_dir, INDEX_NAME):
        _settle(build_dir, name)


def _settle(build_dir: Path, name: str) -> None:
    for stray in build_dir.glob(".*.link-*"):  # a killed run's temp links (all made under
        if stray.is_symlink():  # the union index's lock, which the caller holds)
            stray.unlink()
    _refresh_union_index(build_dir)
    for target_name in manifests(build_dir):
        _drop_unlisted(build_dir, target_name)
    collect(build_dir, name)
    collect(build_dir, INDEX_NAME)


def _swap(build_dir: Path, name: str, store_dir: Path) -> None:
    tmp = build_dir / f".{name}.link-{secrets.token_hex(3)}"
    tmp.symlink_to(os.path.relpath(store_dir, build_dir))
    os.replace(tmp, build_dir / name)


def _carry_over(old: Path, new: Path) -> None:
    """Hard-link into ``new/wheels`` the files of ``old/wheels`` it lacks (until unlisted)."""
    source = old / "wheels"
    if not source.is_dir():
        return
    dest = new / "wheels"
    dest.mkdir(exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.is_file() and not (dest / path.name).exists():
            place(path, dest / path.name)


def _drop_unlisted(build_dir: Path, name: str) -> None:
    """Remove from ``build/<name>/wheels`` the files its manifest does not list."""
    store = current(build_dir, name)
    if store is None or not (store / "wheels").is_dir():
        return
    try:
        listed = {w.filename for w in manifest.read(path_in(store)).wheels}
    except (OSError, manifest.ManifestError):
        return
    keep = listed | {f"{n}.metadata" for n in listed}
    for path in (store / "wheels").iterdir():
        if path.name not in keep and path.is_file():
            path.unlink()


def collect(build_dir: Path, name: str) -> None:
    """Remove the store directories of ``name`` that no link points to (old or interrupted).

    The caller holds ``name``'s lock, so no run is writing a store of ``name`` meanwhile.
    """
    keep = current(build_dir, name)
    pattern = re.compile(rf"^{re.escape(name)}\.[0-9a-f]{{16}}\.[0-9a-f]{{6}}$")
    for path in (build_dir / STORE).glob(f"{name}.*"):
        if pattern.match(path.name) and path.is_dir() and (keep is None or path.resolve() != keep):
            shutil.rmtree(path, ignore_errors=True)


def store_file(store: Path, filename: str) -> Path:
    """Where a listed file lies in a store: ``wheels/<filename>``, a plain name only."""
    if (
        not filename
        or PurePosixPath(filename).name != filename
        or "\\" in filename
        or filename.startswith(".")
    ):
        raise BuildError(f"{filename!r} is not a plain file name; refused as an output file")
    return store / "wheels" / filename


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
        if link.name.startswith("."):
            continue  # .store, .locks, a killed run's temp link: never a target's outputs
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


def _refresh_union_index(build_dir: Path) -> None:
    """Rebuild build/simple from every target's manifest (the caller holds its lock)."""
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
    _swap(build_dir, INDEX_NAME, store)


def refresh_union_index(workspace: Workspace) -> None:
    """Rebuild build/simple from every target's manifest (serialized by its own lock)."""
    with build_lock(workspace.build, INDEX_NAME):
        _refresh_union_index(workspace.build)
        collect(workspace.build, INDEX_NAME)
