"""The test tiers: which tests are integration tests, the network fence around unit tests, and
the exhaustive kill runs behind ``--kill-all``.

- **integration** (marker given here, never by hand): every test under ``tests/integration/``
  and the heavy files of :data:`INTEGRATION_FILES` (real vLLM or torch work, real venvs, real
  package indexes). ``-m "not integration"`` leaves the unit tests.
- **network**: a test that needs the package index marks itself (``pytest.mark.network``).
  Every other test outside the integration tier is a unit test and runs fenced: a socket may
  connect to loopback only (local servers on 127.0.0.1 are fine), and child processes get a
  proxy that refuses (``http(s)_proxy``, with loopback excepted), so pip, uv and git fail at
  once instead of reaching PyPI or GitHub.
- **kill_all**: the exhaustive kill runs (kill -9 before every mutation), skipped unless
  ``pytest --kill-all``.

``nox -s quick`` runs the unit tier in parallel (pytest-xdist); ``nox -s tests`` runs everything.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
INTEGRATION_DIRS = ("integration",)
# Heavy files outside tests/integration: integration tests by what they run, measured
# (pytest --junitxml on 2 cores): tests/bisect/test_bisect.py bisects real git histories with
# the real audit (mypy) at every step: 96 of the unit tier's 374 test-seconds. tests/verify's
# files build their venvs from local wheels in seconds and stay unit tests.
INTEGRATION_FILES: tuple[str, ...] = ("bisect/test_bisect.py",)
REFUSING_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, a connect is refused
LOOPBACK_NAMES = "127.0.0.1,localhost,::1"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--kill-all``: run the exhaustive kill tests (tens of minutes each)."""
    parser.addoption(
        "--kill-all",
        action="store_true",
        default=False,
        help="run the exhaustive kill tests (kill -9 before every mutation; ~25-30 min each)",
    )


def is_integration(path: Path) -> bool:
    """Whether the test file at `path` belongs to the integration tier."""
    try:
        relative = path.resolve().relative_to(TESTS)
    except ValueError:
        return False
    return relative.parts[0] in INTEGRATION_DIRS or relative.as_posix() in INTEGRATION_FILES


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the integration tier by folder; skip the kill-all runs unless asked for."""
    kill_all = bool(config.getoption("--kill-all"))
    skip = pytest.mark.skip(reason="exhaustive kill run (tens of minutes): pytest --kill-all")
    for item in items:
        if is_integration(Path(str(item.path))):
            item.add_marker(pytest.mark.integration)
        if not kill_all and item.get_closest_marker("kill_all") is not None:
            item.add_marker(skip)


def _loopback(address: Any) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like: not the network
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class NetworkBlocked(OSError):
    """A unit test reached past loopback."""


@pytest.fixture(autouse=True)
def _network_fence(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Unit tests (neither integration nor network) reach loopback only, children included."""
    item = request.node
    if item.get_closest_marker("network") or item.get_closest_marker("integration"):
        yield
        return
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if not _loopback(address):
            raise NetworkBlocked(
                f"unit test {item.nodeid} connected to {address!r}: mark it pytest.mark.network "
                "or move it to tests/integration"
            )
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not _loopback(address):
            raise NetworkBlocked(f"unit test {item.nodeid} connected to {address!r}")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, REFUSING_PROXY)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, LOOPBACK_NAMES)
    monkeypatch.setenv("PIP_RETRIES", "0")
    yield
