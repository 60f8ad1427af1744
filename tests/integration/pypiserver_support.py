"""A real pypiserver on a free port of 127.0.0.1 (htpasswd with a random password) for the
publish and consumer tests, and pip with none of this machine's configuration.

Imports nothing from patchwheel (the hardening tests use it too).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from passlib.apache import HtpasswdFile

NULL_KEYRING = "keyring.backends.null.Keyring"


@dataclass
class PypiServer:
    """A running pypiserver: uploads need the user and password of its htpasswd file."""

    url: str
    packages: Path
    username: str
    password: str

    @property
    def simple(self) -> str:
        return self.url + "simple/"

    def env(self, password: str | None = None) -> dict[str, str]:
        """The environment of a publish run: credentials only here, never in arguments."""
        return {
            "TWINE_USERNAME": self.username,
            "TWINE_PASSWORD": self.password if password is None else password,
            "PYTHON_KEYRING_BACKEND": NULL_KEYRING,
        }

    def files(self) -> dict[str, str]:
        """What the server holds: file name -> sha256."""
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.packages.iterdir())
        }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_pypiserver(
    tmp_path: Path, *extra: str, authenticate: str = "update"
) -> tuple[subprocess.Popen[bytes], PypiServer]:
    """pypiserver with an htpasswd file (apr1 hash, made with passlib) and a random password."""

    packages = tmp_path / "server-packages"
    packages.mkdir()
    password = "pw-" + secrets.token_hex(12)
    htpasswd = HtpasswdFile(str(tmp_path / "htpasswd"), new=True)
    htpasswd.set_password("publisher", password)
    htpasswd.save()
    port = free_port()
    log = (tmp_path / "pypiserver.log").open("wb")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "pypiserver", "run", "-p", str(port), "-i", "127.0.0.1"),
            *("-P", str(tmp_path / "htpasswd"), "-a", authenticate, *extra, str(packages)),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    wait_until_serving(proc, url + "health", tmp_path / "pypiserver.log", "pypiserver", 30)
    return proc, PypiServer(url, packages, "publisher", password)


def wait_until_serving(
    proc: subprocess.Popen[bytes], url: str, log: Path, what: str, timeout_s: float
) -> None:
    """Poll ``url`` until it answers 200; if the server exits or ``timeout_s`` passes, kill it
    and fail the test with its log."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{what} did not start:\n" + log.read_text())
        time.sleep(0.1)


def clean_pip_env() -> dict[str, str]:
    """pip with no configuration of this machine (no extra indexes, no find-links)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
