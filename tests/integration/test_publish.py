"""Publishing a built target to a real index server (pypiserver on 127.0.0.1) with twine."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import support
from tests.conftest import copy_tree
from tests.integration.pypiserver_support import (
    NULL_KEYRING,
    PypiServer,
    clean_pip_env,
    free_port,
    start_pypiserver,
)

# passlib (pypiserver's htpasswd support) imports the stdlib crypt module on import.
pytestmark = pytest.mark.filterwarnings("ignore:'crypt' is deprecated:DeprecationWarning")


@pytest.fixture
def pypi_server(tmp_path: Path) -> Iterator[PypiServer]:
    """A real pypiserver on a free port of 127.0.0.1, no fallback to PyPI."""
    proc, server = start_pypiserver(tmp_path, "--disable-fallback")
    yield server
    proc.terminate()
    proc.wait(timeout=10)


class Built(support.BuiltTiny):
    """A checkout whose target ``tiny`` is built: a patched speculators wheel, an upstream sdist."""

    def wheel(self, patched: bool = True) -> dict:
        return next(w for w in self.manifest()["wheels"] if w["patched"] is patched)

    def publish(
        self, server: PypiServer, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return support.patchwheel(
            self.root,
            "publish",
            "--target",
            "tiny",
            "--repository-url",
            server.url,
            *args,
            cache=self.cache,
            env=server.env() if env is None else env,
            timeout=300,
        )

    def report(self) -> dict:
        return json.loads((self.target_dir / "publish.json").read_text())


TARGET = """\
description = "publish test target"
default = true

[projects.speculators]
build = "source"
pin = "speculators @ git+{upstream}@v0.3.0"

[projects.tinydep]
build = "source"
pin = "tinydep==1.0"
"""


@pytest.fixture(scope="module")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """``patchwheel build`` of a speculators-like git pin with one patch, plus an unpatched
    sdist pinned from a local index (copied unchanged into the target)."""
    base = tmp_path_factory.mktemp("publish-build")
    upstream = base / "upstream"
    support.make_upstream(upstream, name="speculators", version="0.3.0")
    tag = support.run_git(upstream, "rev-parse", "v0.3.0")
    support.edit_and_commit(
        upstream,
        "src/speculators/core.py",
        lambda t: t.replace('"hello "', '"patched hello "'),
        "core: a patched greeting",
    )
    root = base / "checkout"
    support.format_patches(upstream, tag, root / "patches" / "tiny" / "speculators")
    dep_src = base / "tinydep"
    support.make_upstream(dep_src, name="tinydep", version="1.0")
    sdist = support.make_sdist(dep_src, base / "files", "tinydep", "1.0")
    index_env = {"PATCHWHEEL_INDEX_URL": support.write_index(base / "index", [sdist])}
    (root / "patches" / "tiny" / "target.toml").write_text(
        TARGET.format(upstream=upstream.as_uri())
    )
    return Built.lock_and_build(root, base / "cache", index_env)


@pytest.fixture
def built(built_once: Built, tmp_path: Path) -> Built:
    """A private copy of the built checkout (tests write reports into build/tiny)."""
    root = tmp_path / "checkout"
    copy_tree(built_once.root, root)
    return Built(root, built_once.cache, built_once.index_env)


def no_secret(result: subprocess.CompletedProcess[str], secret: str) -> None:
    assert secret not in result.stdout
    assert secret not in result.stderr


def test_publish_uploads_and_pip_installs_the_patched_wheel(
    built: Built, pypi_server: PypiServer, tmp_path: Path
) -> None:
    result = built.publish(pypi_server)
    assert result.returncode == 0, result.stderr
    no_secret(result, pypi_server.password)
    assert "2 uploaded" in result.stderr
    wheel, sdist = built.wheel(patched=True), built.wheel(patched=False)
    assert pypi_server.files() == {
        wheel["filename"]: wheel["sha256"],
        sdist["filename"]: sdist["sha256"],
    }
    report = built.report()
    assert report["ok"] and report["summary"] == {"uploaded": 2}
    assert pypi_server.password not in json.dumps(report)

    python = support.fresh_venv(tmp_path / "venv")
    install = subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "--no-deps"),
            *("--index-url", pypi_server.simple, f"speculators=={wheel['version']}"),
        ],
        capture_output=True,
        text=True,
        env=clean_pip_env(),
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    check = subprocess.run(
        [
            str(python),
            "-c",
            "import speculators.core as c, importlib.metadata as m;"
            "print(c.greet('x')); print(m.version('speculators'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.splitlines() == ["patched hello x", wheel["version"]]


def test_publishing_again_uploads_nothing(built: Built, pypi_server: PypiServer) -> None:
    assert built.publish(pypi_server).returncode == 0
    before = {p.name: p.stat().st_mtime_ns for p in pypi_server.packages.iterdir()}
    again = built.publish(pypi_server)
    assert again.returncode == 0, again.stderr
    assert "0 uploaded, 2 skipped" in again.stderr
    assert "uploading" not in again.stderr
    assert {p.name: p.stat().st_mtime_ns for p in pypi_server.packages.iterdir()} == before
    assert [o["status"] for o in built.report()["outcomes"]] == ["skipped", "skipped"]


def test_a_different_file_under_the_same_name_is_refused(
    built: Built, pypi_server: PypiServer, tmp_path: Path
) -> None:
    wheel = built.wheel(patched=True)
    other = support.make_wheel(
        tmp_path / "other", "speculators", wheel["version"], {"speculators/__init__.py": b""}
    )
    assert other.name == wheel["filename"]
    shutil.copy(other, pypi_server.packages / other.name)
    theirs = support.sha256(other)

    result = built.publish(pypi_server)
    assert result.returncode == 1
    assert f"already has a different file named {wheel['filename']}" in result.stderr
    assert theirs in result.stderr and wheel["sha256"] in result.stderr
    assert "new local label" in result.stderr
    assert "nothing of tiny was uploaded" in " ".join(result.stderr.split())
    sdist = built.wheel(patched=False)
    # Every file is checked before any is uploaded: the sdist is held back with the wheel.
    assert pypi_server.files() == {wheel["filename"]: theirs}
    statuses = {o["filename"]: o["status"] for o in built.report()["outcomes"]}
    assert statuses == {wheel["filename"]: "refused", sdist["filename"]: "held"}


def test_wrong_credentials_fail_clearly_and_print_no_secret(
    built: Built, pypi_server: PypiServer
) -> None:
    wrong = "wrong-" + secrets.token_hex(12)
    result = built.publish(pypi_server, env=pypi_server.env(password=wrong))
    assert result.returncode == 1
    assert "refused the credentials (HTTP 403" in result.stderr
    assert "TWINE_USERNAME and TWINE_PASSWORD" in result.stderr
    no_secret(result, wrong)
    no_secret(result, pypi_server.password)
    assert pypi_server.files() == {}


def test_missing_credentials_say_where_to_put_them(built: Built, pypi_server: PypiServer) -> None:
    env = {"TWINE_USERNAME": "", "TWINE_PASSWORD": "", "PYTHON_KEYRING_BACKEND": NULL_KEYRING}
    result = built.publish(pypi_server, env=env)
    assert result.returncode == 1
    assert "no credentials for" in result.stderr and "keyring" in result.stderr
    assert pypi_server.files() == {}


def test_credentials_in_the_url_are_refused_and_not_printed(
    built: Built, pypi_server: PypiServer
) -> None:
    url = pypi_server.url.replace("http://", f"http://publisher:{pypi_server.password}@")
    result = support.patchwheel(
        built.root, "publish", "--repository-url", url, cache=built.cache, env=pypi_server.env()
    )
    assert result.returncode == 1
    assert "carries credentials" in result.stderr
    no_secret(result, pypi_server.password)
    assert pypi_server.files() == {}


def write_report(
    built: Built, name: str, status: str, sha256s: list[str], inputs: str | None = None
) -> None:
    report = {
        "target": "tiny",
        "inputs": built.manifest()["inputs"] if inputs is None else inputs,
        "status": status,
        "packages": [{"distribution": "x", "version": "1", "sha256": s} for s in sha256s],
    }
    (built.target_dir / name).write_text(json.dumps(report))


def test_require_verified_uploads_only_a_verified_build(
    built: Built, pypi_server: PypiServer
) -> None:
    wheel, sdist = built.wheel(patched=True), built.wheel(patched=False)

    none = built.publish(pypi_server, "--require-verified")
    assert none.returncode == 1
    assert "verify-cpu.json: missing" in none.stderr
    assert "verify-gpu.json: missing" in none.stderr
    assert pypi_server.files() == {}

    write_report(built, "verify-cpu.json", "mismatch", [wheel["sha256"]])
    write_report(built, "verify-gpu.json", "passed", [wheel["sha256"]], inputs="0" * 64)
    neither = built.publish(pypi_server, "--require-verified")
    assert neither.returncode == 1
    assert "verify-cpu.json: not passed (status: 'mismatch')" in neither.stderr
    assert "verify-gpu.json: not a report of this build" in neither.stderr
    assert pypi_server.files() == {}
    statuses = {o["filename"]: o["status"] for o in built.report()["outcomes"]}
    assert statuses == {wheel["filename"]: "unverified", sdist["filename"]: "unverified"}

    write_report(built, "verify-gpu.json", "passed", ["0" * 64])  # lists another file
    stale = built.publish(pypi_server, "--require-verified")
    assert stale.returncode == 1
    assert pypi_server.files() == {}

    # This build's passing report lists the patched wheel: the unpatched sdist (the pinned
    # file itself, which verify never installs) goes with it.
    write_report(built, "verify-gpu.json", "passed", [wheel["sha256"]])
    done = built.publish(pypi_server, "--require-verified")
    assert done.returncode == 0, done.stderr
    assert "2 uploaded" in done.stderr
    assert pypi_server.files() == {
        wheel["filename"]: wheel["sha256"],
        sdist["filename"]: sdist["sha256"],
    }


def test_dry_run_and_only_patched_upload_nothing(built: Built, pypi_server: PypiServer) -> None:
    result = built.publish(pypi_server, "--dry-run", "--only-patched", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(o["filename"], o["status"]) for o in report["outcomes"]] == [
        (built.wheel(patched=True)["filename"], "would-upload")
    ]
    assert pypi_server.files() == {}


def test_a_redirect_to_another_index_is_not_taken_for_the_repository(
    built: Built, tmp_path: Path
) -> None:
    # pypiserver's default: projects it lacks redirect to a fallback index (PyPI). Files there
    # must not count as published here; the fallback below is another origin that is not up.
    proc, server = start_pypiserver(
        tmp_path, "--fallback-url", f"http://127.0.0.2:{free_port()}/simple/"
    )
    try:
        result = built.publish(server, "--only-patched")
        assert result.returncode == 0, result.stderr
        assert list(server.files()) == [built.wheel(patched=True)["filename"]]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_wheel_changed_since_the_build_is_not_uploaded(
    built: Built, pypi_server: PypiServer
) -> None:
    wheel = built.wheel(patched=True)
    path = built.target_dir / "wheels" / wheel["filename"]
    data = path.read_bytes()
    path.unlink()  # replace, never edit in place: build outputs may be hard links
    path.write_bytes(data + b"\0")
    result = built.publish(pypi_server, "--only-patched")
    assert result.returncode == 1
    assert "changed since the build" in result.stderr
    assert pypi_server.files() == {}


def test_an_index_that_lists_only_to_users_is_read_with_the_credentials(
    built: Built, tmp_path: Path
) -> None:
    proc, server = start_pypiserver(tmp_path, "--disable-fallback", authenticate="list,update")
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server.simple, timeout=10)
        assert info.value.code == 401
        wrong = "wrong-" + secrets.token_hex(12)
        refused = built.publish(server, "--only-patched", env=server.env(password=wrong))
        assert refused.returncode == 1
        assert f"{server.simple} refused the credentials (HTTP 403" in refused.stderr
        no_secret(refused, wrong)
        assert server.files() == {}
        result = built.publish(server, "--only-patched")
        assert result.returncode == 0, result.stderr
        assert "1 uploaded" in result.stderr
        again = built.publish(server, "--only-patched")
        assert "0 uploaded, 1 skipped" in again.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=10)
