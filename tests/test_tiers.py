"""The test tiers (tests/tiers.py): unit tests reach loopback and nothing past it, their
children included; the integration tier is given by folder."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests import tiers

TESTS = Path(__file__).resolve().parent


def test_a_unit_test_reaches_a_server_on_loopback() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def accept() -> None:
            server.accept()[0].close()

        accepted = threading.Thread(target=accept)
        accepted.start()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        accepted.join(timeout=5)


def test_a_unit_test_cannot_reach_past_loopback() -> None:
    # TEST-NET-1: no name lookup, and nothing would answer there anyway.
    with pytest.raises(tiers.NetworkBlocked, match=r"192\.0\.2\.1"):
        socket.create_connection(("192.0.2.1", 443), timeout=5)


def test_a_unit_tests_children_get_a_proxy_that_refuses() -> None:
    code = "import urllib.request; urllib.request.urlopen('http://192.0.2.1/', timeout=10)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "Connection refused" in done.stderr, done.stderr[-500:]


@pytest.mark.parametrize(
    ("path", "integration"),
    [
        ("integration/test_build.py", True),
        ("bisect/test_bisect.py", True),
        ("bisect/test_inputs.py", False),
        ("verify/test_compare.py", False),
        ("test_tiers.py", False),
    ],
)
def test_the_integration_tier_is_given_by_folder(path: str, integration: bool) -> None:
    assert tiers.is_integration(TESTS / path) is integration
    assert not tiers.is_integration(TESTS.parent / "src" / "patchwheel" / "__init__.py")


def test_this_file_runs_as_a_unit_test(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("integration") is None
