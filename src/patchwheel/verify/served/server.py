"""A server process on loopback, started and stopped by the code that needs it.

:class:`ServerProcess` runs a command (``vllm serve …``) as the leader of a process group of its
own, its output in a log file that stays on disk. :meth:`ServerProcess.wait_ready` polls a URL
until it answers 200, and fails at once when the process exits first, naming what its log says
killed it (:func:`log_cause`). It is stopped on every way out of its ``with`` block: a normal
exit, an exception, SIGINT (KeyboardInterrupt) and SIGTERM (turned into an exception while the
block runs); the whole group gets SIGTERM, then SIGKILL after a grace period, so the engine and
worker processes ``vllm serve`` forks go with it. If this process itself is SIGKILLed, the
server's leader gets SIGTERM from the kernel (``PR_SET_PDEATHSIG``, set by a small exec wrapper
before the command starts; vLLM's own processes follow their parent).

:func:`free_port` asks the kernel for a free port; the port is only reserved once the server
binds it, so a server that loses the race ("address already in use") is started again on
another port (:func:`serve`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from patchwheel.errors import VerifyError

# Set the parent-death signal, then become the command (Linux; elsewhere just exec).
_WRAPPER = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)
_ADDRESS_IN_USE = re.compile(r"address already in use|Errno 98", re.IGNORECASE)
# A vLLM log line's prefix: "(Worker pid=13839) ERROR 12-03 16:38:41 [multiproc_executor.py:1063] "
_PREFIX = re.compile(r"^(?:\([^)]*\)\s+)?(?:[A-Z]+\s+\d\d-\d\d \d\d:\d\d:\d\d \[[^\]]*\]\s?)?")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b.*")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


class ServerExited(VerifyError):
    """The server process exited before it was ready (or while it was needed)."""

    def __init__(self, message: str, *, returncode: int | None, cause: str | None) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.cause = cause


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


# Exceptions that only point elsewhere ("see root cause above"): the cause is an earlier one.
_WRAPPERS = re.compile(
    r"root cause above|stack trace above|initialization failed|EngineDeadError|EngineGenerateError|"
    r"died unexpectedly|KeyboardInterrupt|SystemExit",
    re.IGNORECASE,
)


def log_cause(text: str, *, packages: Sequence[str] = ("vllm", "hs_connectors")) -> str | None:
    """What killed a process, from its log: the last exception ending a traceback that is not a
    mere pointer to another ("see root cause above"), with the innermost frame of ``packages``
    that raised it (``vllm/…/example_hidden_states_connector.py:402 in _submit_async_write:
    RuntimeError: …``); None when the log holds no traceback."""
    lines = [_PREFIX.sub("", line.rstrip()) for line in text.splitlines()]
    ends: list[int] = []
    in_traceback = False
    for index, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and _EXCEPTION.match(line):
            ends.append(index)
            in_traceback = False
    if not ends:
        return None
    chosen = next((i for i in reversed(ends) if not _WRAPPERS.search(lines[i])), ends[-1])
    frame = None
    for line in reversed(lines[:chosen]):
        if line.startswith("Traceback"):
            break
        found = _FRAME.match(line)
        if found and any(f"/{p}/" in found["file"] for p in packages):
            frame = found
            break
    # A message on several lines (pydantic's "1 validation error for VllmConfig" names the
    # error on the indented lines after it): those lines belong to it.
    detail = []
    for line in lines[chosen + 1 : chosen + 4]:
        if not line.startswith((" ", "\t")) or "errors.pydantic.dev" in line:
            break
        detail.append(line.strip())
    message = "; ".join([lines[chosen].strip(), *detail])
    if frame is None:
        return message
    where = frame["file"]
    for package in packages:
        if f"/{package}/" in where:
            where = package + "/" + where.rsplit(f"/{package}/", 1)[1]
    return f"{where}:{frame['line']} in {frame['func']}: {message}"


class ServerProcess:
    """One server command in its own process group, logging to ``log``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        cwd: Path | None = None,
        name: str = "server",
        python: str = sys.executable,
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.log = log
        self.cwd = cwd
        self.name = name
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None
        self._previous: Any = None
        self._offset = 0  # where this run's output starts in the log
        self._started = time.monotonic()

    def start(self) -> None:
        """Start the command (a new session: it leads its own process group)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        self._started = time.monotonic()
        with self.log.open("ab") as handle:
            self.proc = subprocess.Popen(
                [self.python, "-c", _WRAPPER, *self.argv],
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise VerifyError(f"{self.name} was never started")
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        """What this run wrote to the log."""
        try:
            with self.log.open("rb") as handle:
                handle.seek(self._offset)
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def exited(self, what: str) -> ServerExited:
        """The error for a server that is gone: its status and what its log says."""
        code = None if self.proc is None else self.proc.poll()
        cause = log_cause(self.log_text())
        tail = "\n".join(self.log_text().strip().splitlines()[-12:])
        return ServerExited(
            f"{self.name} exited with status {code} {what}"
            + (f": {cause}" if cause else "")
            + f" (log: {self.log})"
            + ("" if cause else f"\n{tail}"),
            returncode=code,
            cause=cause,
        )

    def wait_ready(
        self, url: str, *, timeout_s: float, poll_s: float = 1.0, once: bool = False
    ) -> float | None:
        """Poll ``url`` until it answers 200; the seconds since the start. ServerExited if the
        process exits first, VerifyError after ``timeout_s``. ``once``: one poll, None if it
        did not answer yet."""
        while True:
            if not self.alive():
                raise self.exited("before it was ready")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        return time.monotonic() - self._started
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() - self._started > timeout_s:
                raise VerifyError(
                    f"{self.name} did not answer {url} within {timeout_s:.0f} s (log: {self.log})"
                )
            if once:
                return None
            time.sleep(poll_s)

    def stop(self, *, grace_s: float = 30.0) -> int | None:
        """SIGTERM to the whole group, SIGKILL after ``grace_s``; the leader's status."""
        if self.proc is None:
            return None
        pgid = self.proc.pid  # the leader of its own session: the group id is its pid
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(pgid):
                break
            deadline = time.monotonic() + wait
            while _group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not _group_alive(pgid):
                break
        return self.proc.poll()

    def __enter__(self) -> ServerProcess:
        self._install_sigterm()
        try:
            self.start()
        except BaseException:
            self._restore_sigterm()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._restore_sigterm()

    def _install_sigterm(self) -> None:
        """While the server runs, SIGTERM raises (so the ``with`` block's exit stops it)."""
        if not _main_thread():
            return

        def raise_on_term(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        self._previous = signal.signal(signal.SIGTERM, raise_on_term)

    def _restore_sigterm(self) -> None:
        if self._previous is not None and _main_thread():
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@dataclass(frozen=True)
class Served:
    """A server that answered: its process, its port and how long it took to be ready."""

    server: ServerProcess
    port: int
    ready_s: float


@contextlib.contextmanager
def serve_all(
    commands: Mapping[str, Callable[[int], Sequence[str]]],
    *,
    env: Mapping[str, str],
    logs: Mapping[str, Path],
    ready_path: str,
    timeout_s: float,
    names: Mapping[str, str] | None = None,
    python: str = sys.executable,
    attempts: int = 3,
) -> Iterator[dict[str, Served]]:
    """Servers on free ports of 127.0.0.1, all started before any is waited for (they start
    up side by side), ready: by key.

    ``commands[key](port)`` is a server's command. A server that exits because another
    process took its port first is started again on a new one (``attempts`` in all); any other
    early exit is ServerExited naming the cause. Every server is stopped when the block is
    left, however it is left."""
    names = names or {key: key for key in commands}
    with contextlib.ExitStack() as stack:
        running: dict[str, tuple[ServerProcess, int]] = {}

        def launch(key: str) -> None:
            port = free_port()
            server = ServerProcess(
                commands[key](port), env=env, log=logs[key], name=names[key], python=python
            )
            stack.enter_context(server)
            running[key] = (server, port)

        for key in commands:
            launch(key)
        ready: dict[str, Served] = {}
        tries = dict.fromkeys(commands, 1)
        while len(ready) < len(commands):
            for key in commands:
                if key in ready:
                    continue
                server, port = running[key]
                try:
                    answered = server.wait_ready(
                        f"http://127.0.0.1:{port}{ready_path}", timeout_s=timeout_s, once=True
                    )
                except ServerExited as exc:
                    if tries[key] < attempts and _ADDRESS_IN_USE.search(server.log_text()):
                        tries[key] += 1
                        launch(key)
                        continue
                    raise exc from None
                if answered is not None:
                    ready[key] = Served(server, port, answered)
            if len(ready) < len(commands):
                time.sleep(1.0)
        yield ready


@contextlib.contextmanager
def serve(
    make_argv: Callable[[int], Sequence[str]],
    *,
    env: Mapping[str, str],
    log: Path,
    ready_path: str,
    timeout_s: float,
    name: str,
    python: str = sys.executable,
    attempts: int = 3,
) -> Iterator[tuple[ServerProcess, int, float]]:
    """One server of :func:`serve_all`: (process, port, seconds to ready)."""
    with serve_all(
        {name: make_argv},
        env=env,
        logs={name: log},
        ready_path=ready_path,
        timeout_s=timeout_s,
        python=python,
        attempts=attempts,
    ) as ready:
        served = ready[name]
        yield served.server, served.port, served.ready_s
