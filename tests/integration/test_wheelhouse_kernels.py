"""A wheelhouse's CUDA kernels checked against the destination's GPUs: a real CUDA library
from the index (nvidia-nvjpeg 13.3.2.43, 3.8 MB) carried beside a tiny target's wheel."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import Checkout

pytestmark = pytest.mark.network

LIB = "nvidia/cu13/lib/libnvjpeg.so.13"
ARGS = (
    "wheelhouse",
    "--json",
    "--with",
    "nvidia-nvjpeg==13.3.2.43",
    "--exclude-newer",
    "none",
    "--python-version",
    "3.12",
    "--platform",
    "manylinux_2_28_x86_64",
)


@pytest.fixture
def built(checkout: Checkout) -> Checkout:
    for command in ("lock", "build"):
        proc = checkout.run(command)
        assert proc.returncode == 0, proc.stderr
    return checkout


def test_the_carried_cuda_library_runs_on_the_destinations_gpus(built: Checkout) -> None:
    proc = built.run(*ARGS, "--gpu-arch", "sm_90", "--gpu-arch", "sm_120")
    assert proc.returncode == 0, proc.stderr
    lock = json.loads(proc.stdout)
    gpu = lock["gpu"]
    assert gpu["archs"] == ["sm_90", "sm_120"] and gpu["wheels-read"] == len(lock["wheels"])
    (row,) = gpu["modules"]
    assert row["module"] == LIB and row["gpus"] == {"sm_90": "sass", "sm_120": "sass"}
    said = re.sub(r"\s+", " ", proc.stderr)
    assert "CUDA kernels of the wheelhouse" in said and f"{LIB} │" in said
    on_disk = json.loads((built.build / "tiny" / "wheelhouse" / "wheelhouse.lock.json").read_text())
    assert on_disk["gpu"] == gpu


def test_a_gpu_the_library_cannot_run_on_stops_the_wheelhouse(built: Checkout) -> None:
    proc = built.run(*ARGS, "--gpu-arch", "sm_70")
    assert proc.returncode == 1, proc.stderr
    said = re.sub(r"\s+", " ", proc.stderr)
    assert "the wheelhouse of tiny: 1 CUDA module/GPU pair(s)" in said
    assert f"{LIB} (nvidia_nvjpeg-13.3.2.43" in said and "cannot run on sm_70" in said
    assert "Traceback" not in proc.stderr
    assert not (built.build / "tiny" / "wheelhouse").exists()  # nothing written


def test_a_bad_gpu_name_is_a_usage_error(built: Checkout) -> None:
    proc = built.run(*ARGS, "--gpu-arch", "sm_90a")
    assert proc.returncode == 2 and "names code, not a GPU" in proc.stderr
    proc = built.run(*ARGS, "--gpu-arch", "none", "--gpu-arch", "sm_90")
    assert proc.returncode == 2 and "give it alone" in proc.stderr
