"""Extraction at a tensor-parallel size on the tiny model, compared with transformers."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from patchwheel.verify.compare import TensorCheck, max_error_per_layer
from patchwheel.verify.extraction import (
    EXTRACT_SCRIPT,
    compare_with_reference,
    load_extraction,
    run_script,
)
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.model import make_tiny_llama
from patchwheel.verify.plan import VerifyPlan, write_request

TIMEOUT_S = 1200


def check_extraction(
    options: GpuOptions, runtime: Runtime, tp: int, console: Console
) -> dict[str, Any]:
    """Extraction at tensor parallel ``tp`` on the tiny model, compared with transformers."""
    plan = VerifyPlan(dtype=options.dtype, gpu_memory_utilization=0.3)
    model_dir = make_tiny_llama(plan.spec, options.work_dir / "model")
    calls = plan.prompts(model_dir)
    out_dir = options.work_dir / f"extract-tp{tp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    request = out_dir / "request.json"
    write_request(plan, model_dir, calls, request)
    data = json.loads(request.read_text("utf-8"))
    data["generator"]["tensor_parallel_size"] = tp
    request.write_text(json.dumps(data), "utf-8")
    with console.status(f"extracting on the GPU (tensor parallel {tp})"):
        wall, log = run_script(
            runtime.python,
            EXTRACT_SCRIPT,
            request,
            out_dir,
            env=runtime.env,
            timeout_s=TIMEOUT_S,
            label=f"extraction at tensor parallel {tp}",
        )
    extraction = load_extraction(out_dir, calls, wall, log)
    checks: list[TensorCheck]
    checks, reference = compare_with_reference(plan, model_dir, calls, extraction)
    failures = [c for c in checks if not c.ok]
    return {
        "tensor_parallel_size": tp,
        "calls": [[len(p) for p in prompts] for prompts in calls],
        "max_num_batched_tokens": plan.max_num_batched_tokens,
        "layers": list(plan.layer_ids),
        "max_abs_error_per_layer": {str(k): v for k, v in max_error_per_layer(checks).items()},
        "checks": len(checks),
        "failed": [c.describe() for c in failures[:20]],
        "wall_s": round(wall, 1),
        "settings": {
            "extraction": {"requested": extraction.requested, "effective": extraction.effective},
            "reference": {"effective": reference},
        },
    }
