"""Publish a built target's files to a package repository with twine, safely and repeatably.

What is published: the files of ``build/<target>/manifest.json`` (``wheels``): the patched
wheels and the unpatched upstream copies, so the internal index serves the whole set
(``only_patched`` keeps the patched ones). Before anything is uploaded, the repository's Simple
API is read: a file already there with the same sha256 is skipped; a different file under the
same name is refused (a published name is immutable; a changed build must carry a new local
label). Every file is checked — its bytes against the manifest, the repository's file of that
name, its verification — before any is uploaded: one that fails holds back the whole set, so
the repository never serves part of a build.

With ``require_verified``, a report counts only if it is of this build (its ``inputs`` is the
manifest's) and its ``status`` is ``"passed"``. A file passes if such a report lists its
sha256; an unpatched upstream copy (its sha256 the lock's: the pinned artifact itself, which
verify may not install — an sdist never) passes once such reports list every patched file of
the build, since nothing of ours is in it and the stack it belongs to was verified.

Credentials come from ``TWINE_USERNAME``/``TWINE_PASSWORD`` or keyring, as twine reads them;
they are never taken on the command line, and every line shown is scrubbed of them. The
target's build lock is held throughout, so a concurrent build cannot replace the files being
uploaded. The outcome is written to ``build/<target>/publish.json``.
"""

from __future__ import annotations

import importlib
import importlib.util
import ipaddress
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from rich.markup import escape

from patchwheel import atomic, console, manifest
from patchwheel.errors import PublishError
from patchwheel.http import REDACTED, has_userinfo, redact
from patchwheel.publish.remote import Credentials, RemoteIndex
from patchwheel.publish.verified import unverified, verified_sha256s
from patchwheel.upstream.cache import sha256_file
from patchwheel.workspace import Workspace

REPORT_NAME = "publish.json"
TWINE_TIMEOUT_S = 3600

Status = Literal["uploaded", "skipped", "refused", "unverified", "failed", "would-upload", "held"]
_HTTP_ERROR = re.compile(r"HTTPError: (\d{3})\b([^\n]*)")


@dataclass(frozen=True)
class Candidate:
    """A file of the target's manifest that may be published."""

    filename: str
    path: Path
    sha256: str
    distribution: str
    patched: bool
    size: int


@dataclass
class Outcome:
    """What happened to one file."""

    filename: str
    sha256: str
    status: Status
    detail: str = ""
    seconds: float | None = None


@dataclass
class PublishReport:
    """What a publish run did, file by file."""

    target: str
    repository_url: str
    index_url: str
    dry_run: bool
    require_verified: bool
    outcomes: list[Outcome] = field(default_factory=list)
    verification: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, status: Status) -> int:
        """How many files ended with ``status``."""
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def ok(self) -> bool:
        """Whether every file is on the repository (or would be, in a dry run)."""
        return all(o.status in ("uploaded", "skipped", "would-upload") for o in self.outcomes)

    def problem(self) -> str:
        """Why the run failed: the files that failed their checks, and what was held back."""
        failed = [o for o in self.outcomes if o.status not in ("uploaded", "skipped", "held")]
        held = [o for o in self.outcomes if o.status == "held"]
        text = "; ".join(f"{o.filename}: {o.status}" for o in failed)
        if held:
            return (
                f"nothing of {self.target} was uploaded to {self.repository_url}: every file is "
                f"checked before any is uploaded, and {len(failed)} failed ({text}); see above"
            )
        return f"{len(failed)} file(s) of {self.target} are not on {self.repository_url}: {text}"

    def summary(self) -> str:
        """One line: the count of each outcome that occurred."""
        order: tuple[Status, ...] = (
            "uploaded",
            "would-upload",
            "skipped",
            "refused",
            "unverified",
            "failed",
            "held",
        )
        parts = [f"{self.count(s)} {s}" for s in order if self.count(s) or s == "uploaded"]
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report (``build/<target>/publish.json``)."""
        data = asdict(self)
        data["summary"] = {s: self.count(s) for s in {o.status for o in self.outcomes}}
        data["ok"] = self.ok
        return data


class Scrubber:
    """Removes secrets (and any ``user:password@`` in URLs) from text before it is shown."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return redact(text)


def credentials_from_environment(repository_url: str) -> Credentials | None:
    """The credentials twine will use: ``TWINE_USERNAME``/``TWINE_PASSWORD``, else keyring."""
    username = os.environ.get("TWINE_USERNAME") or None
    password = os.environ.get("TWINE_PASSWORD") or None
    if username and password:
        return Credentials(username, password)
    keyring = _keyring()
    if keyring is None:
        return None
    try:
        if username:
            stored = keyring.get_password(repository_url, username)
            return Credentials(username, stored) if stored else None
        credential = keyring.get_credential(repository_url, None)
    except Exception:  # any keyring backend failure means: no stored credentials
        return None
    if credential is None or not credential.username or not credential.password:
        return None
    return Credentials(str(credential.username), str(credential.password))


def _keyring() -> Any:
    if importlib.util.find_spec("keyring") is None:
        return None
    return importlib.import_module("keyring")


def check_repository_url(url: str, option: str = "--repository-url") -> None:
    """Refuse a repository URL that is not http(s) or that carries credentials (shown
    redacted)."""
    if has_userinfo(url):
        raise PublishError(
            f"{option} {redact(url)} carries credentials: never put them on the command "
            "line; set TWINE_USERNAME and TWINE_PASSWORD in the environment, or store them "
            "with keyring"
        )
    try:
        parts = urlsplit(url)
        scheme, hostname = parts.scheme, parts.hostname
    except ValueError:
        scheme, hostname = "", None
    if scheme not in ("http", "https") or not hostname:
        raise PublishError(f"{option} {redact(url)!r} is not an http(s) URL")


def check_transport(url: str, *, allow_http: bool) -> None:
    """Refuse to send credentials over plain http to a host other than this machine's
    loopback unless the user allows it (``--allow-http``)."""
    parts = urlsplit(url)
    if parts.scheme == "https" or allow_http or _loopback(parts.hostname or ""):
        return
    raise PublishError(
        f"--repository-url {redact(url)} is plain http: the credentials would cross the "
        "network unencrypted; use https, or pass --allow-http if you accept that"
    )


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def candidates(target_dir: Path, *, only_patched: bool = False) -> list[Candidate]:
    """The files the target's manifest lists (``build/<target>/wheels``), checked on disk."""
    manifest_path = manifest.path_in(target_dir)
    if not manifest_path.is_file():
        raise PublishError(
            f"{manifest_path} does not exist: build the target first "
            f"(nox -s build -- --target {target_dir.name})"
        )
    try:
        built = manifest.read(manifest_path)
    except manifest.ManifestError as exc:
        raise PublishError(
            f"{manifest_path} is not a patchwheel manifest ({exc}): rebuild"
        ) from exc
    found: list[Candidate] = []
    for wheel in built.wheels:
        if only_patched and not wheel.patched:
            continue
        path = target_dir / "wheels" / wheel.filename
        if not path.is_file():
            raise PublishError(f"{path} is listed in {manifest_path} but missing: rebuild")
        found.append(
            Candidate(
                filename=wheel.filename,
                path=path,
                sha256=wheel.sha256,
                distribution=wheel.distribution,
                patched=wheel.patched,
                size=path.stat().st_size,
            )
        )
    return found


def publish_target(
    target: str,
    workspace: Workspace,
    repository_url: str,
    *,
    index_url: str | None = None,
    require_verified: bool = False,
    only_patched: bool = False,
    dry_run: bool = False,
    allow_http: bool = False,
) -> PublishReport:
    """Upload what ``build/<target>`` holds and the repository lacks; report each file.

    Raises PublishError for what stops the whole run: no build, the repository unreachable,
    credentials missing or refused. Refused, unverified and failed files are reported.
    """
    start = time.monotonic()
    check_repository_url(repository_url)
    if index_url:
        check_repository_url(index_url, "--index-url")
    credentials = credentials_from_environment(repository_url)
    if credentials is not None or not dry_run:
        check_transport(repository_url, allow_http=allow_http)
    scrub = Scrubber([credentials.password] if credentials else [])
    if not dry_run:
        _check_twine()
        if credentials is None:
            raise _no_credentials(repository_url)
    target_dir = workspace.target_dir(target)
    if not target_dir.is_symlink() and not target_dir.is_dir():
        raise PublishError(
            f"{target_dir} does not exist: build the target first (nox -s build -- --target "
            f"{target})"
        )
    with workspace.locked(target):
        files = candidates(target_dir, only_patched=only_patched)
        built = manifest.read(manifest.path_in(target_dir))
        remote = RemoteIndex.for_repository(repository_url, credentials, index_url)
        report = PublishReport(target, repository_url, remote.index_url, dry_run, require_verified)
        held: dict[str, str] = {}
        if require_verified:
            verified, report.verification = verified_sha256s(target_dir, built.inputs or "")
            for name, state in report.verification.items():
                console.status(escape(f"verification report {name}: {state}"))
            held = unverified(files, built, verified)
        console.status(
            escape(
                f"publishing {len(files)} file(s) of {target} to {repository_url} "
                f"(index {remote.index_url})"
            )
        )
        try:
            # Every file is checked before any is uploaded: one that fails holds back all.
            checked = [_check_one(c, remote, repository_url, held) for c in files]
            blocked = sum(1 for o in checked if o is not None and o.status not in _DONE)
            for number, (candidate, found) in enumerate(zip(files, checked, strict=True), 1):
                outcome = found or _go(candidate, blocked, remote, repository_url, scrub, dry_run)
                report.outcomes.append(outcome)
                _show(number, len(files), outcome)
        finally:
            report.seconds = time.monotonic() - start
            if not dry_run:
                atomic.write_json(target_dir / REPORT_NAME, report.to_json())
    return report


_DONE: tuple[Status, ...] = ("skipped",)


def _go(
    candidate: Candidate,
    blocked: int,
    remote: RemoteIndex,
    repository_url: str,
    scrub: Scrubber,
    dry_run: bool,
) -> Outcome:
    """Upload a file that passed its checks, unless another file of the build failed them."""
    if blocked:
        return Outcome(
            candidate.filename,
            candidate.sha256,
            "held",
            f"not uploaded: {blocked} file(s) of the build failed the checks",
        )
    if dry_run:
        size = console.human_bytes(candidate.size)
        return Outcome(candidate.filename, candidate.sha256, "would-upload", size)
    return _upload(candidate, remote, repository_url, scrub)


def _check_one(
    candidate: Candidate, remote: RemoteIndex, repository_url: str, held: dict[str, str]
) -> Outcome | None:
    """What stops one file (or says it is there already); None: it is to be uploaded."""
    name, digest = candidate.filename, candidate.sha256
    actual = sha256_file(candidate.path)
    if actual != digest:
        return Outcome(
            name,
            digest,
            "failed",
            f"{candidate.path} changed since the build (sha256 {actual}, manifest {digest}); "
            "rebuild the target",
        )
    if name in held:
        return Outcome(name, digest, "unverified", held[name])
    existing = remote.files(candidate.distribution).get(name)
    if existing is not None:
        return _compare(candidate, existing.sha256, repository_url)
    return None


def _compare(candidate: Candidate, remote_sha256: str | None, repository_url: str) -> Outcome:
    name, digest = candidate.filename, candidate.sha256
    if remote_sha256 == digest:
        return Outcome(name, digest, "skipped", "already on the repository (same sha256)")
    stated = f"sha256 {remote_sha256}" if remote_sha256 else "no sha256 stated"
    return Outcome(
        name,
        digest,
        "refused",
        f"{repository_url} already has a different file named {name} ({stated}; ours: "
        f"sha256 {digest}). A published name never changes its bytes: rebuild so the wheel "
        "gets a new local label (change a patch, pin or build setting), or remove the "
        "repository's file by hand if nobody installed it",
    )


def _upload(
    candidate: Candidate, remote: RemoteIndex, repository_url: str, scrub: Scrubber
) -> Outcome:
    name, digest = candidate.filename, candidate.sha256
    start = time.monotonic()
    with _activity(f"uploading {escape(name)} ({console.human_bytes(candidate.size)}) …"):
        returncode, output = _twine_upload(candidate.path, repository_url, scrub)
    seconds = time.monotonic() - start
    if returncode == 0:
        listed = remote.files(candidate.distribution).get(name)
        if listed is not None and listed.sha256 not in (None, digest):
            return Outcome(
                name,
                digest,
                "failed",
                f"uploaded, but the repository now lists sha256 {listed.sha256}",
                seconds,
            )
        note = "" if listed is not None else " (the index does not list it yet)"
        return Outcome(name, digest, "uploaded", f"in {seconds:.1f} s{note}", seconds)
    http = _HTTP_ERROR.search(output)
    code = int(http.group(1)) if http else None
    reason = http.group(2).split(" from ")[0].strip() if http else ""
    if code in (401, 403):
        raise PublishError(
            f"{repository_url} refused the credentials (HTTP {code} {reason}) while uploading "
            f"{name}: check TWINE_USERNAME and TWINE_PASSWORD, or the keyring entry for "
            f"{repository_url}. Nothing after {name} was uploaded"
        )
    if "Credential not found" in output or "NonInteractive" in output:
        raise _no_credentials(repository_url)
    if code in (400, 409):  # perhaps uploaded meanwhile by someone else
        existing = remote.files(candidate.distribution).get(name)
        if existing is not None:
            return _compare(candidate, existing.sha256, repository_url)
    if code is None:
        raise PublishError(
            f"twine could not upload {name} to {repository_url}: {_tail(output)}. "
            f"Nothing after {name} was uploaded"
        )
    return Outcome(name, digest, "failed", f"twine: {_tail(output)}", seconds)


@contextmanager
def _activity(message: str) -> Iterator[None]:
    """A spinner on a terminal, one line in a log, while twine runs."""
    if console.is_interactive():
        with console.stderr.status(message):
            yield
    else:
        console.status(message)
        yield


def _no_credentials(repository_url: str) -> PublishError:
    return PublishError(
        f"no credentials for {repository_url}: set TWINE_USERNAME and TWINE_PASSWORD in the "
        f"environment, or store them with keyring (keyring set {repository_url} USER). "
        "patchwheel never takes them on the command line"
    )


def _check_twine() -> None:
    if importlib.util.find_spec("twine") is None:
        raise PublishError(
            "twine is not installed in this environment: install patchwheel's publish extra "
            "or twine itself (nox -s publish does)"
        )


def _twine_upload(path: Path, repository_url: str, scrub: Scrubber) -> tuple[int, str]:
    """Run ``twine upload`` for one file; return its status and scrubbed output."""
    command = [
        sys.executable,
        "-m",
        "twine",
        "upload",
        "--non-interactive",
        "--disable-progress-bar",
        "--repository-url",
        repository_url,
        str(path),
    ]
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"}
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            timeout=TWINE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise PublishError(
            f"twine did not finish uploading {path.name} within {TWINE_TIMEOUT_S} s"
        ) from exc
    return result.returncode, scrub(result.stdout + result.stderr)


def _tail(output: str, lines: int = 4) -> str:
    kept = [line.strip() for line in output.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "no output"


STYLES: dict[Status, str] = {
    "uploaded": "green",
    "would-upload": "cyan",
    "skipped": "dim",
    "refused": "red",
    "unverified": "yellow",
    "failed": "red",
    "held": "yellow",
}


def _show(number: int, total: int, outcome: Outcome) -> None:
    style = STYLES[outcome.status]
    console.status(
        f"\\[{number}/{total}] [{style}]{outcome.status}[/] "
        f"{escape(outcome.filename)}: {escape(outcome.detail)}"
    )
