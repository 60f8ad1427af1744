"""The GPU session's parts that run without a GPU: refusal, wheel checks, prompts, summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.gpu import install, machine, report
from patchwheel.verify.payloads import speed
from tests import support


def write_manifest(target_dir: Path, wheels: list[Path]) -> None:
    target_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for path in wheels:
        dist, version = path.name.split("-")[:2]
        entries.append(
            {
                "project": "vllm" if dist == "vllm" else dist,
                "variant": "cuda" if dist == "vllm" else None,
                "distribution": dist.replace("_", "-"),
                "version": version,
                "filename": path.name,
                "sha256": support.sha256(path),
            }
        )
    (target_dir / "manifest.json").write_text(json.dumps({"wheels": entries}))


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    """A target dir with a manifest of a speculators and a vllm wheel, and a wheelhouse."""
    house = tmp_path / "wheelhouse"
    wheels = [
        support.make_wheel(house, "speculators", "0.3.0+pw1", {"speculators/__init__.py": b""}),
        support.make_wheel(house, "vllm", "0.26.0", {"vllm/__init__.py": b""}),
    ]
    target = tmp_path / "build" / "vllm-0.26"
    write_manifest(target, wheels)
    return target, house


def test_refuses_without_a_gpu_and_writes_no_report(tmp_path: Path, built) -> None:
    target, house = built
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "patchwheel",
            "--root",
            str(tmp_path),
            "gpu",
            "--target",
            "vllm-0.26",
            "--wheelhouse",
            str(house),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "no CUDA GPU is visible" in proc.stderr
    assert "nox -s verify" in proc.stderr
    assert not (target / report.REPORT_NAME).exists()


def test_refuses_more_tensor_parallel_ranks_than_gpus() -> None:
    with pytest.raises(VerifyError, match=r"no CUDA GPU|needs 64 GPUs"):
        machine.gpu_facts(64)


def test_gpu_wheels_are_found_in_the_wheelhouse_and_hash_checked(built) -> None:
    target, house = built
    wheels = install.gpu_wheels(target, house)
    assert [w.distribution for w in wheels] == ["speculators", "vllm"]
    assert all(w.path.parent == house for w in wheels)
    (house / wheels[1].filename).write_bytes(b"tampered")
    with pytest.raises(VerifyError, match="has sha256"):
        install.gpu_wheels(target, house)


def test_a_target_without_the_cuda_variant_is_refused(tmp_path: Path) -> None:
    house = tmp_path / "house"
    only = [support.make_wheel(house, "speculators", "0.3.0", {"speculators/__init__.py": b""})]
    write_manifest(tmp_path / "t", only)
    with pytest.raises(VerifyError, match="lists 0 vllm wheels"):
        install.gpu_wheels(tmp_path / "t", house)


def test_random_prompts_are_the_same_for_both_sides() -> None:
    request = {"random_prompts": {"count": 4, "length": 16, "vocab_size": 100, "seed": 7}}
    first, second = speed.prompts_of(request), speed.prompts_of(request)
    assert first == second
    assert [len(p) for p in first] == [16] * 4
    assert all(3 <= t < 100 for p in first for t in p)
    assert speed.prompts_of({"prompts": [[1, 2]]}) == [[1, 2]]
