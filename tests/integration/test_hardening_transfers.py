"""Issue 31: hostile transfers — split/join (``patchwheel join`` and the copied ``join.py``) and
``patchwheel serve`` — refuse what could write, delete or leak outside their folder.

Black box: real files made by ``patchwheel split``, real servers on 127.0.0.1, raw sockets;
each test snapshots the surroundings of the stated folder and asserts they are unchanged.
Nothing here imports patchwheel except the last test (the rule's two copies agree), so the
tests run against main's code as well (``PYTHONPATH=<main>/src``).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from . import hardening_support as hs
from .transfer_support import Transfer, make_transfer, outside, raw_request, serve, sha

RUNNERS = ["cli", "script"]


@pytest.fixture
def transfer(tmp_path: Path) -> Transfer:
    return make_transfer(tmp_path)


def _refused(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    hs.assert_refused(result, *needles)


# --------------------------------------------------------------------------- join: names


@pytest.mark.parametrize("how", RUNNERS)
@pytest.mark.parametrize("where", ["dotdot", "absolute"])
def test_join_never_reads_or_deletes_a_part_outside_its_folder(
    transfer: Transfer, how: str, where: str
) -> None:
    """A part named ``../precious.txt`` (or its absolute path), sha256s made to match."""
    part = "../precious.txt" if where == "dotdot" else str(transfer.precious)
    data = transfer.precious.read_bytes()
    manifest = transfer.manifest()
    entry = {"name": "evil.bin", "size": len(data), "sha256": sha(data), "parts": []}
    entry["parts"] = [{"name": part, "size": len(data), "sha256": sha(data)}]
    manifest["files"].append(entry)
    transfer.write_manifest(manifest)
    before = outside(transfer.base, "transfer")

    result = transfer.join(how)

    _refused(result, "precious.txt")
    assert outside(transfer.base, "transfer") == before, "a file outside the folder changed"
    assert not (transfer.folder / "evil.bin").exists()


@pytest.mark.parametrize("how", RUNNERS)
@pytest.mark.parametrize("where", ["dotdot", "absolute"])
def test_join_never_writes_a_file_outside_its_folder(
    transfer: Transfer, how: str, where: str
) -> None:
    """A file named ``x/../../escaped.whl`` (empty folder x/ shipped) or an absolute name."""
    # the folders that make the name resolve (for the file and main's temporary ".NAME.joining")
    for shipped in ("x", ".x", str(transfer.base).lstrip("/")):
        (transfer.folder / shipped).mkdir(parents=True, exist_ok=True)
    name = "x/../../escaped.whl" if where == "dotdot" else str(transfer.base / "escaped.whl")
    first = (transfer.folder / "big.whl.001").read_bytes()
    manifest = transfer.manifest()
    manifest["files"].insert(  # first: joined while big.whl.001 is still there
        0,
        {
            "name": name,
            "size": len(first),
            "sha256": sha(first),
            "parts": [{"name": "big.whl.001", "size": len(first), "sha256": sha(first)}],
        },
    )
    transfer.write_manifest(manifest)
    before = outside(transfer.base, "transfer")

    result = transfer.join(how)

    _refused(result, "escaped.whl")
    assert not (transfer.base / "escaped.whl").exists(), "written outside the folder"
    assert outside(transfer.base, "transfer") == before


@pytest.mark.parametrize("how", RUNNERS)
def test_sha256sums_names_stay_inside_the_folder(transfer: Transfer, how: str) -> None:
    """SHA256SUMS listing ``../precious.txt`` (its true sha256) is refused, not checked."""
    sums = transfer.folder / "SHA256SUMS"
    sums.write_text(sums.read_text() + f"{sha(transfer.precious.read_bytes())}  ../precious.txt\n")
    before = outside(transfer.base, "transfer")

    result = transfer.join(how)

    _refused(result, "precious.txt")
    assert outside(transfer.base, "transfer") == before


# --------------------------------------------------------------------------- join: links


@pytest.mark.parametrize("how", RUNNERS)
@pytest.mark.parametrize("damaged", [False, True], ids=["good-parts", "bad-part"])
def test_join_follows_no_link_at_its_temporary_file(
    transfer: Transfer, how: str, damaged: bool
) -> None:
    """``.big.whl.joining`` (main's temporary name) is a link to a file outside."""
    (transfer.folder / ".big.whl.joining").symlink_to(transfer.precious)
    if damaged:
        part = transfer.folder / "big.whl.002"
        part.write_bytes(b"X" + part.read_bytes()[1:])
    before = outside(transfer.base, "transfer")

    result = transfer.join(how)

    assert outside(transfer.base, "transfer") == before, "the link was followed: " + hs.tail(
        result, 500
    )
    if damaged:
        _refused(result, "big.whl.002")
    else:
        hs.assert_ok(result)
        assert sha((transfer.folder / "big.whl").read_bytes()) == sha(transfer.big)


@pytest.mark.parametrize("how", RUNNERS)
@pytest.mark.parametrize("kind", ["other-file", "link-out"])
def test_join_replaces_no_destination_that_is_not_its_own(
    transfer: Transfer, how: str, kind: str
) -> None:
    """big.whl exists already: another regular file (someone's), or a link leading out."""
    dest = transfer.folder / "big.whl"
    if kind == "other-file":
        dest.write_bytes(b"not the joined file\n")
    else:
        dest.symlink_to(transfer.precious)
    before = hs.snapshot(transfer.base)

    result = transfer.join(how)

    _refused(result, "big.whl")
    assert hs.snapshot(transfer.base) == before, "the refusal changed files"


# --------------------------------------------------------------------------- join: verify


@pytest.mark.parametrize("how", RUNNERS)
def test_join_of_a_missing_folder_fails_naming_it(transfer: Transfer, how: str) -> None:
    missing = transfer.base / "never-copied"
    before = hs.snapshot(transfer.base)

    result = transfer.join(how, folder=missing)

    _refused(result, "never-copied")
    assert hs.snapshot(transfer.base) == before


@pytest.mark.parametrize("how", RUNNERS)
def test_join_without_sha256sums_fails_and_keeps_the_parts(transfer: Transfer, how: str) -> None:
    (transfer.folder / "SHA256SUMS").unlink()
    before = outside(transfer.base, "transfer")

    result = transfer.join(how)

    _refused(result, "SHA256SUMS")
    assert sorted(p.name for p in transfer.folder.glob("big.whl.0*")) == [
        "big.whl.001",
        "big.whl.002",
        "big.whl.003",
    ]
    assert outside(transfer.base, "transfer") == before


@pytest.mark.parametrize("how", RUNNERS)
def test_parts_are_removed_only_after_everything_is_verified(transfer: Transfer, how: str) -> None:
    """small.whl was damaged in transfer: the join fails and keeps every part."""
    (transfer.folder / "small.whl").write_bytes(b"damaged\n")

    result = transfer.join(how)

    _refused(result, "small.whl")
    assert sorted(p.name for p in transfer.folder.glob("big.whl.0*")) == [
        "big.whl.001",
        "big.whl.002",
        "big.whl.003",
    ], "parts removed although the transfer failed its check"


# --------------------------------------------------------------------------- split


def test_split_overwrites_no_existing_part(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a.bin").write_bytes(os.urandom(150_000))
    (folder / "a.bin.001").write_bytes(b"someone else's file\n")
    before = hs.snapshot(tmp_path)

    result = hs.patchwheel(tmp_path, "split", str(folder), "--size", "64kB", cache=tmp_path / "c")

    _refused(result, "a.bin.001")
    assert hs.snapshot(tmp_path) == before


def test_split_makes_no_part_the_shell_fallback_cannot_join(tmp_path: Path) -> None:
    """INSTALL.txt's fallback is ``cat NAME.[0-9][0-9][0-9] > NAME``: 1000 parts break it."""
    folder = tmp_path / "f"
    folder.mkdir()
    data = os.urandom(1000)
    (folder / "a.bin").write_bytes(data)

    result = hs.patchwheel(tmp_path, "split", str(folder), "--size", "1", cache=tmp_path / "c")

    if result.returncode == 0:
        joined = subprocess.run(
            "cat a.bin.[0-9][0-9][0-9]", shell=True, cwd=folder, capture_output=True, check=True
        ).stdout
        assert joined == data, f"the shell fallback joins {len(joined)} of {len(data)} bytes"
    else:
        _refused(result, "999")
        assert sorted(p.name for p in folder.iterdir()) == ["a.bin"]


# --------------------------------------------------------------------------- serve


@pytest.fixture
def build_root(tmp_path: Path) -> Path:
    """A checkout whose build/ holds an index, a target link into .store, and two links
    that lead out of build/ (to a secret file and to a folder)."""
    root = tmp_path / "checkout"
    build = root / "build"
    (build / "simple" / "tinyproj").mkdir(parents=True)
    (build / "simple" / "index.html").write_text("<html>index</html>\n")
    (build / "simple" / "tinyproj" / "index.html").write_text("<html>tinyproj</html>\n")
    store = build / ".store" / "tiny-1"
    store.mkdir(parents=True)
    (store / "manifest.json").write_text("{}\n")
    (build / "tiny").symlink_to(Path(".store") / "tiny-1")
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "key.txt").write_text("SECRET-KEY-MATERIAL\n")
    (build / "simple" / "leak.txt").symlink_to(secret_dir / "key.txt")
    (build / "leakdir").symlink_to(secret_dir)
    return root


def _status(answer: bytes) -> int:
    line = answer.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) > 1 and line[0].startswith(b"HTTP/") else 0


def test_serve_refuses_links_out_of_build(build_root: Path, tmp_path: Path) -> None:
    with serve(build_root, tmp_path / "c") as server:
        inside = raw_request(server.port, b"GET /tiny/manifest.json HTTP/1.0\r\n\r\n")
        answers = {
            path: raw_request(server.port, f"GET {path} HTTP/1.0\r\n\r\n".encode())
            for path in ("/simple/leak.txt", "/leakdir/key.txt")
        }
    assert _status(inside) == 200, "a link inside build/ (a target into .store) must work"
    for path, answer in answers.items():
        assert b"SECRET-KEY-MATERIAL" not in answer, f"{path} served a file outside build/"
        assert _status(answer) == 404, f"{path}: {answer[:200]!r}"


BAD_REQUESTS = {
    "nul-escaped": b"GET /simple/%00/ HTTP/1.0\r\n\r\n",
    "nul-raw": b"GET /simple/\x00x HTTP/1.0\r\n\r\n",
    "long-path": b"GET /" + b"a" * 8000 + b" HTTP/1.0\r\n\r\n",
    "long-component": b"GET /simple/" + b"b" * 300 + b"/ HTTP/1.0\r\n\r\n",
    "bad-escape": b"GET /simple/%ff%fe/ HTTP/1.0\r\n\r\n",
    "traversal": b"GET /../../etc/passwd HTTP/1.0\r\n\r\n",
}


def test_serve_answers_every_bad_request_without_a_traceback(
    build_root: Path, tmp_path: Path
) -> None:
    with serve(build_root, tmp_path / "c") as server:
        answers = {name: raw_request(server.port, req) for name, req in BAD_REQUESTS.items()}
        after = raw_request(server.port, b"GET /simple/ HTTP/1.0\r\n\r\n")
        log = server.output()
    problems = [
        f"{name}: {answer[:80]!r}"
        for name, answer in answers.items()
        if _status(answer) not in (400, 404, 414)
    ]
    assert not problems, "not answered 400/404: " + "; ".join(problems)
    assert "Traceback" not in log, log[-3000:]
    assert _status(after) == 200


def test_serve_closes_idle_connections(build_root: Path, tmp_path: Path) -> None:
    """A client that connects and says nothing is disconnected after --timeout seconds."""
    with serve(build_root, tmp_path / "c", "--timeout", "1") as server:
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
            try:
                closed = sock.recv(1) == b""
            except TimeoutError:
                closed = False
        assert closed and time.monotonic() - start < 10, "the idle connection was kept"


def _clients(port: int, count: int, timeout: float) -> list[int]:
    statuses: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        try:
            answer = raw_request(port, b"GET /simple/ HTTP/1.0\r\n\r\n", timeout=timeout)
        except OSError:
            answer = b""
        with lock:
            statuses.append(_status(answer))

    threads = [threading.Thread(target=client) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout + 20)
    return statuses


def test_serve_answers_200_clients_at_once(build_root: Path, tmp_path: Path) -> None:
    """The listen backlog holds a burst: 200 clients at once are all answered in 15 s."""
    with serve(build_root, tmp_path / "c") as server:
        statuses = _clients(server.port, 200, 15)
    assert statuses.count(200) == 200, f"{200 - statuses.count(200)} of 200 got no answer"


def test_serve_answers_many_clients_while_idle_ones_wait(build_root: Path, tmp_path: Path) -> None:
    """100 idle connections (more than its threads) and 200 clients at once: every client is
    answered."""
    with serve(build_root, tmp_path / "c", "--timeout", "2") as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(100)]
        statuses: list[int] = []
        lock = threading.Lock()

        def client() -> None:
            try:
                answer = raw_request(server.port, b"GET /simple/ HTTP/1.0\r\n\r\n", timeout=20)
            except OSError:
                answer = b""
            with lock:
                statuses.append(_status(answer))

        threads = [threading.Thread(target=client) for _ in range(200)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=40)
        for sock in idle:
            sock.close()
        log = server.output()
    assert statuses.count(200) == 200, (
        f"{200 - statuses.count(200)} of 200 clients got no answer; {len(statuses)} finished"
    )
    assert "Traceback" not in log, log[-2000:]


# --------------------------------------------------------------------------- the rule's copies


def test_join_script_and_library_share_one_name_rule(transfer: Transfer) -> None:
    """join.py (stdlib only) carries a copy of the library's rule: both answer alike."""
    # imported here, not at the top: the black-box tests above also run against main's code
    from patchwheel.errors import InvalidNameError  # noqa: PLC0415
    from patchwheel.workspace import PATH_RULE, check_relative_path  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("shipped_join", transfer.folder / "join.py")
    assert spec is not None and spec.loader is not None
    shipped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shipped)
    values: list[object] = [
        "big.whl",
        "tinyproj-1.0+pw6acb24a-py3-none-any.whl",
        "sub/dir/file.bin",
        ".hidden",
        "a b",
        "../x",
        "x/../../y",
        "/abs/x",
        "x/",
        "x//y",
        "./x",
        "x\\y",
        "x\x00y",
        "x\ny",
        "",
        "a" * 255,
        "a" * 256,
        "é" * 128,
        None,
        7,
        ["x"],
    ]
    answers = {}
    for value in values:
        try:
            check_relative_path(value, "name")
            library = True
        except InvalidNameError:
            library = False
        try:
            shipped.check_path(value, "name")
            script = True
        except shipped.PartsError:
            script = False
        answers[repr(value)[:40]] = (library, script)
    assert all(a == b for a, b in answers.values()), answers
    assert answers["'../x'"] == (False, False) and answers["'big.whl'"] == (True, True)
    assert shipped.PATH_RULE == PATH_RULE
