"""The server launcher with real processes: ready on loopback, failing with its cause, and
stopped (with everything it forked) on every way out, signals included."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.served.server import (
    ServerExited,
    ServerProcess,
    free_port,
    log_cause,
    serve,
)
from tests import support

HTTP = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1"]


def gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie still answers kill(0): its status line says so
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "zombie" in status.read_text():
            return True
        time.sleep(0.1)
    return False


def test_ready_then_stopped_with_its_whole_group(tmp_path: Path) -> None:
    port = free_port()
    # The leader starts a second process in its group, as vllm serve starts its engine.
    script = tmp_path / "two.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import subprocess, sys, time
            child = subprocess.Popen({[*HTTP, str(port)]!r})
            open({str(tmp_path / "child.pid")!r}, "w").write(str(child.pid))
            time.sleep(600)
            """
        )
    )
    server = ServerProcess(
        [sys.executable, str(script)], env=dict(os.environ), log=tmp_path / "log", name="two"
    )
    with server:
        took = server.wait_ready(f"http://127.0.0.1:{port}/", timeout_s=30, poll_s=0.2)
        assert took < 30 and server.alive()
        child = int((tmp_path / "child.pid").read_text())
        assert os.getpgid(child) == server.pid  # the leader's own group
    assert gone(server.pid) and gone(child)


def test_an_early_exit_names_the_cause_from_the_log(tmp_path: Path) -> None:
    # A real traceback from a module under a "vllm" folder, as vLLM's own would be.
    package = tmp_path / "site" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "boom.py").write_text(
        "def connector(name):\n    raise ValueError(f'Unsupported connector type {name}')\n"
    )
    code = (
        "import sys, traceback\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from vllm.boom import connector\n"
        "try:\n    connector('ExampleHiddenStatesConector')\n"
        "except ValueError:\n    traceback.print_exc()\n"
        "raise RuntimeError('Engine core initialization failed. See root cause above.')\n"
    )
    server = ServerProcess(
        [sys.executable, "-c", code, str(tmp_path / "site")],
        env=dict(os.environ),
        log=tmp_path / "log",
        name="vllm serve",
    )
    with server, pytest.raises(ServerExited) as raised:
        server.wait_ready(f"http://127.0.0.1:{free_port()}/health", timeout_s=30, poll_s=0.2)
    message = str(raised.value)
    # The root cause, not the wrapper that points at it; where vLLM raised it; no traceback.
    assert raised.value.cause == (
        "vllm/boom.py:2 in connector: ValueError: Unsupported connector type "
        "ExampleHiddenStatesConector"
    )
    assert "vllm serve exited with status 1 before it was ready" in message
    assert "Traceback" not in message and str(tmp_path / "log") in message


def test_log_cause_reads_vllms_prefixed_lines() -> None:
    text = "\n".join(
        f"(Worker pid=7) ERROR 12-03 16:38:41 [multiproc_executor.py:1063] {line}"
        for line in (
            "Traceback (most recent call last):",
            '  File "/v/lib/python3.11/site-packages/vllm/distributed/x.py", line 402, in '
            "_submit_async_write",
            "    pinned_hs = torch.empty_like(",
            "RuntimeError: pin_memory=True requires a CUDA or other accelerator backend",
        )
    )
    assert log_cause(text) == (
        "vllm/distributed/x.py:402 in _submit_async_write: RuntimeError: pin_memory=True "
        "requires a CUDA or other accelerator backend"
    )
    assert log_cause("INFO all well\n") is None


def test_log_cause_keeps_a_message_on_several_lines(tmp_path: Path) -> None:
    # A real process whose exception's message runs over lines, as pydantic's does.
    code = (
        "raise ValueError('1 validation error for VllmConfig\\n  Value error, Unsupported "
        "connector type: Misspelled [type=value_error]\\n    For further information visit "
        "https://errors.pydantic.dev/2.14/v/value_error')"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert log_cause(proc.stderr + "INFO shutting down\n") == (
        "ValueError: 1 validation error for VllmConfig; Value error, Unsupported connector "
        "type: Misspelled [type=value_error]"
    )


def test_a_taken_port_is_retried_on_another(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        tried: list[int] = []

        def argv(port: int) -> list[str]:
            tried.append(port)
            # The first attempt loses the race: its port is someone else's.
            return [*HTTP, str(busy if len(tried) == 1 else port)]

        with serve(
            argv,
            env=dict(os.environ),
            log=tmp_path / "log",
            ready_path="/",
            timeout_s=30,
            name="http",
        ) as (server, port, _ready):
            assert port == tried[1] and server.alive()
        assert gone(server.pid)
        assert "Address already in use" in (tmp_path / "log").read_text()


def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    server = ServerProcess(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env=dict(os.environ),
        log=tmp_path / "log",
        name="mute",
    )
    with server, pytest.raises(VerifyError, match="did not answer"):
        server.wait_ready(f"http://127.0.0.1:{free_port()}/", timeout_s=2, poll_s=0.2)
    assert gone(server.pid)


PARENT = """\
import os, sys, time
from pathlib import Path
sys.path.insert(0, {src!r})
from patchwheel.verify.served.server import ServerProcess
out = Path({out!r})
server = ServerProcess({argv!r}, env=dict(os.environ), log=out / "log", name="http")
with server:
    server.wait_ready("http://127.0.0.1:{port}/", timeout_s=30, poll_s=0.2)
    (out / "server.pid").write_text(str(server.pid))
    time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_the_server_dies_with_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    port = free_port()
    code = PARENT.format(
        src=str(support.REPO_ROOT / "src"), out=str(tmp_path), argv=[*HTTP, str(port)], port=port
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "server.pid").exists():
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        server = int((tmp_path / "server.pid").read_text())
        parent.send_signal(sig)
        parent.wait(timeout=60)
        assert gone(server), f"the server outlived its parent's {sig.name}"
    finally:
        parent.kill()
