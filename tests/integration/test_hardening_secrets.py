"""Issue 31: secrets and hostile inputs of ``publish`` and ``wheelhouse`` (and the GPU report).

No secret given to a verb appears in its output, in the files it writes, or in its requests to
another host: the "other host" is a real HTTP server on 127.0.0.1 (or on this machine's own
non-loopback address, for plain http) that records every request. The repository is a real
pypiserver and uploads go through real twine. Black box except the GPU report's test; runs
against main's code as well (``PYTHONPATH=<main>/src``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import hardening_support as hs
from .pypiserver_support import PypiServer, start_pypiserver
from .transfer_support import SECRET, lan_address, recorder

pytestmark = pytest.mark.filterwarnings("ignore:'crypt' is deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> hs.Workspace:
    """Target ``tiny`` built (an overlay wheel from a local index), for publish and wheelhouse."""
    ws = hs.overlay_workspace(tmp_path_factory.mktemp("secrets"))
    hs.assert_ok(ws.run("lock"))
    ws.build_ok()
    return ws


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PypiServer]:
    proc, server = start_pypiserver(tmp_path, "--disable-fallback")
    yield server
    proc.terminate()
    proc.wait(timeout=10)


def _files_holding(root: Path, *secrets: str) -> list[str]:
    """Files under ``root`` whose bytes contain a secret."""
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and any(s.encode() in p.read_bytes() for s in secrets)
    ]


def _no_secret(result: object, root: Path, *secrets: str) -> None:
    out = result.stdout + result.stderr  # type: ignore[attr-defined]
    shown = [s for s in secrets if s in out]
    assert not shown, f"the output shows {shown}: {out[-1500:]}"
    written = _files_holding(root, *secrets)
    assert not written, f"files hold a secret: {written}"


# --------------------------------------------------------------------------- publish


@pytest.mark.parametrize("case", ["token-as-user", "password-with-at"])
def test_publish_never_shows_credentials_given_in_the_repository_url(
    built: hs.Workspace, case: str
) -> None:
    userinfo = SECRET if case == "token-as-user" else f"user:p@ss-{SECRET}"
    url = f"https://{userinfo}@127.0.0.1:9/"
    before = hs.snapshot(built.root)

    result = built.run("publish", "--repository-url", url, "--dry-run")

    hs.assert_refused(result, "credentials")
    _no_secret(result, built.root, SECRET, "p@ss")
    assert hs.snapshot(built.root) == before


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "upload"])
def test_publish_sends_credentials_only_to_the_repository_origin(
    built: hs.Workspace, server: PypiServer, dry_run: bool
) -> None:
    """--index-url on another origin (a server that asks for credentials, HTTP 401)."""
    with recorder() as other:
        result = built.run(
            "publish",
            *("--repository-url", server.url, "--index-url", other.url + "simple/"),
            *(["--dry-run"] if dry_run else []),
            env=server.env(password=SECRET),
        )
    assert not other.leaked(SECRET), f"the other origin got credentials: {other.requests[:2]}"
    assert result.returncode != 0 and hs.raised(result.stdout + result.stderr) is None
    _no_secret(result, built.root, SECRET)
    assert server.files() == {}, "uploaded although the index could not be read"


def test_publish_never_shows_credentials_given_in_the_index_url(
    built: hs.Workspace, server: PypiServer
) -> None:
    with recorder() as other:
        index = other.url.replace("http://", f"http://user:{SECRET}@") + "simple/"
        result = built.run(
            "publish",
            *("--repository-url", server.url, "--index-url", index, "--dry-run"),
            env=server.env(),
        )
    hs.assert_refused(result, "--index-url")
    _no_secret(result, built.root, SECRET, server.password)
    assert not other.leaked(SECRET, server.password), other.requests[:2]


def test_publish_sends_no_credentials_over_plain_http_to_another_host(
    built: hs.Workspace,
) -> None:
    """A repository on this machine's own non-loopback address, over http: refused unless
    --allow-http; the server is never sent the credentials."""
    address = lan_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    with recorder(address) as other:
        result = built.run(
            "publish",
            *("--repository-url", other.url, "--dry-run"),
            env={"TWINE_USERNAME": "publisher", "TWINE_PASSWORD": SECRET},
        )
    assert not other.leaked(SECRET), f"credentials went over plain http: {other.requests[:2]}"
    hs.assert_refused(result, "--allow-http")
    _no_secret(result, built.root, SECRET)


# --------------------------------------------------------------------------- wheelhouse


def _wheelhouse(ws: hs.Workspace, *args: str, env: dict[str, str] | None = None) -> object:
    return ws.run(
        "wheelhouse", "--variant", "plain", "--exclude-newer", "none", *args, env=env, timeout=300
    )


@pytest.mark.parametrize("where", ["absolute", "dotdot"])
def test_installed_json_names_are_checked(built: hs.Workspace, tmp_path: Path, where: str) -> None:
    """``pip list --format=json`` of the destination naming ``/abs/dir/pwn`` or ``../x``."""
    pwn = tmp_path / "abs-dir"
    pwn.mkdir()
    name = str(pwn / "pwn") if where == "absolute" else "../x"
    installed = tmp_path / "installed.json"
    installed.write_text(json.dumps([{"name": name, "version": "1.0"}]))
    before = hs.snapshot(tmp_path)

    result = _wheelhouse(built, "--installed", str(installed), "--out", str(tmp_path / "wh"))

    hs.assert_refused(result, name)  # type: ignore[arg-type]
    assert list(pwn.iterdir()) == [], "a stub wheel was written where the name points"
    assert hs.snapshot(tmp_path) == before


def test_out_never_replaces_a_folder_it_did_not_write(built: hs.Workspace, tmp_path: Path) -> None:
    """A folder that merely holds a file named wheelhouse.lock.json is not a wheelhouse."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "wheelhouse.lock.json").write_text("{}\n")
    (out / "thesis.tex").write_text("three years of work\n")
    before = hs.snapshot(tmp_path)

    result = _wheelhouse(built, "--out", str(out))

    hs.assert_refused(result, "thesis.tex")  # type: ignore[arg-type]
    assert hs.snapshot(tmp_path) == before


def test_a_huge_freeze_line_is_not_echoed_whole(built: hs.Workspace, tmp_path: Path) -> None:
    installed = tmp_path / "installed.txt"
    installed.write_text("torch==2.11.0\n" + "%" * 10_000_000 + "\n")

    result = _wheelhouse(built, "--installed", str(installed), "--dry-run")

    hs.assert_refused(result, "line 2")  # type: ignore[arg-type]
    shown = len(result.stderr) + len(result.stdout)  # type: ignore[attr-defined]
    assert shown < 20_000, f"{shown} characters of output for one bad line"


def test_the_lock_holds_no_index_credentials(built: hs.Workspace, tmp_path: Path) -> None:
    """pip's index URL carries a token: the lock that travels (and serve serves) must not."""
    out = tmp_path / "wh"
    with recorder(status=404) as index:
        url = index.url.replace("http://", f"http://__token__:{SECRET}@")
        result = _wheelhouse(built, "--out", str(out), "--json", env={"PATCHWHEEL_INDEX_URL": url})
    hs.assert_ok(result)  # type: ignore[arg-type]
    assert (out / "wheelhouse.lock.json").is_file()
    _no_secret(result, tmp_path, SECRET)
    _no_secret(result, built.root, SECRET)


# --------------------------------------------------------------------------- the GPU report


def test_the_gpu_report_records_secret_variables_by_name_only() -> None:
    """verify-gpu.json lists inherited HF_*/VLLM_* variables; a token's value never."""
    from patchwheel.verify.gpu import environment  # noqa: PLC0415 (the file runs against main too)

    base = {
        "HF_TOKEN": SECRET,
        "HF_HUB_TOKEN": SECRET + "-2",
        "VLLM_API_KEY": SECRET + "-3",
        "HF_HOME": "/models/hf",
        "PATH": "/usr/bin",
    }
    recorded = environment.inherited(base)
    text = json.dumps(recorded)
    assert SECRET not in text, recorded
    assert {"HF_TOKEN", "HF_HUB_TOKEN", "VLLM_API_KEY"} <= set(recorded), "names are recorded"
    assert recorded["HF_HOME"] == "/models/hf"
