"""Issue 11: ``publish --require-verified`` cannot pass by accident.

A real pypiserver on 127.0.0.1 (htpasswd, random password) and twine, as users publish.
The target ``tiny`` has a patched overlay wheel (``tinyproj``) and an unpatched upstream sdist
(``tinydep``, copied unchanged). Verification reports are written the way the verify layer
writes them, plus ``"inputs"``: the inputs hash of the build they verified (manifest.json's
``inputs``), which is what binds a report to one build.

What "an sdist can never pass" becomes (decided here): the verify sessions install wheels, so
no report lists the unpatched upstream sdist. An unpatched upstream file is the pinned artifact
itself (its sha256 is the lock's); it is published when a passing report bound to the build's
inputs verifies the build, i.e. every *patched* file is listed by such a report.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import hardening_support as hs
from .pypiserver_support import PypiServer, start_pypiserver

pytestmark = pytest.mark.filterwarnings("ignore:'crypt' is deprecated:DeprecationWarning")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PypiServer]:
    """pypiserver with an htpasswd file, no fallback to PyPI."""
    proc, server = start_pypiserver(tmp_path, "--disable-fallback")
    yield server
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def built_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, hs.Workspace]:
    base = tmp_path_factory.mktemp("publish")
    ws = hs.overlay_workspace(base, with_sdist_dep=True)
    hs.add_overlay_patches(ws, count=1)
    hs.assert_ok(ws.run("lock"))
    ws.build_ok()
    return base, ws


@dataclass
class Built:
    ws: hs.Workspace

    @property
    def target_dir(self) -> Path:
        return self.ws.build / hs.TARGET

    def manifest(self) -> dict[str, object]:
        return self.ws.manifest()

    @property
    def inputs(self) -> str:
        return str(self.manifest()["inputs"])

    def file(self, *, patched: bool) -> dict[str, str]:
        wheels = self.manifest()["wheels"]
        assert isinstance(wheels, list)
        return next(w for w in wheels if w["patched"] is patched)

    def report(self, name: str = "verify-cpu.json", **fields: object) -> None:
        data = {
            "schema": 1,
            "target": hs.TARGET,
            "inputs": self.inputs,
            "status": "passed",
            "passed": True,
            "packages": [],
        }
        data.update(fields)
        (self.target_dir / name).write_text(json.dumps(data, indent=1))

    def publish(self, server: PypiServer) -> subprocess.CompletedProcess[str]:
        return self.ws.run(
            *("publish", "--target", hs.TARGET, "--repository-url", server.url),
            "--require-verified",
            env=server.env(),
            timeout=300,
        )


@pytest.fixture
def built(built_template: tuple[Path, hs.Workspace], tmp_path: Path) -> Built:
    base, ws = built_template
    return Built(hs.copy_workspace(ws, base, tmp_path / "copy"))


def package(entry: dict[str, str]) -> dict[str, str]:
    return {"filename": entry["filename"], "sha256": entry["sha256"], "distribution": "x"}


def test_passed_true_does_not_override_a_failed_status(built: Built, server: PypiServer) -> None:
    everything = [package(built.file(patched=True)), package(built.file(patched=False))]
    built.report(status="failed", passed=True, packages=everything)

    result = built.publish(server)

    problems = hs.refusal_problems(result, "verify-cpu.json")
    if server.files():
        problems.append(f"uploaded {sorted(server.files())} on a failed report")
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


def test_a_report_of_another_build_of_the_target_is_refused(
    built: Built, server: PypiServer
) -> None:
    """Same target name, same files listed, but it verified other inputs: not a pass."""
    everything = [package(built.file(patched=True)), package(built.file(patched=False))]
    other = hashlib.sha256(b"another build of tiny").hexdigest()
    assert other != built.inputs
    built.report(inputs=other, packages=everything)

    result = built.publish(server)

    problems = hs.refusal_problems(result, "verify-cpu.json")
    if server.files():
        problems.append(f"uploaded {sorted(server.files())} on another build's report")
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


def test_one_unverified_file_means_nothing_is_uploaded(built: Built, server: PypiServer) -> None:
    wheel, sdist = built.file(patched=True), built.file(patched=False)
    built.report(packages=[package(sdist)])  # bound and passed, but not the patched wheel

    result = built.publish(server)

    problems = hs.refusal_problems(result, wheel["filename"])
    if server.files():
        problems.append(
            f"uploaded {sorted(server.files())} although {wheel['filename']} is unverified"
        )
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


def test_an_unpatched_upstream_sdist_of_a_verified_build_is_published(
    built: Built, server: PypiServer
) -> None:
    wheel, sdist = built.file(patched=True), built.file(patched=False)
    assert sdist["filename"].endswith(".tar.gz")
    built.report(packages=[package(wheel)])  # what verify writes: the wheels it installed

    result = built.publish(server)

    hs.assert_ok(result)
    assert sorted(server.files()) == sorted([wheel["filename"], sdist["filename"]])
    for name in server.files():
        entry = wheel if name == wheel["filename"] else sdist
        assert hs.sha256(server.packages / name) == entry["sha256"]
