"""One model family at one tensor-parallel size: speculators' extraction against both oracles.

Per family the same seeded model (:mod:`patchwheel.verify.models.families`) and the same prompts
(the verify plan's two calls plus a call of long prompts, every one longer than a step) go
through three sides, each in its own process:

- extraction: speculators' VllmHiddenStatesGenerator at its GPU default (compiled, CUDA
  graphs), ``enforce_eager`` passed explicitly (``gpu/extract_gpu.py``);
- the vLLM oracle: the same layers hooked in a plain ``vllm.LLM`` (``verify/payloads/oracle.py``);
- transformers: the residual stream of the same weights (in this process, on the CPU).

Verdict: extraction must be within tolerance of the vLLM oracle, and of transformers unless
vLLM itself disagrees with transformers on that family (the oracle vs transformers comparison
fails); then that disagreement is recorded and the vLLM oracle alone is required. A generator
that does not accept a requested setting fails the family; each side's effective settings are
read from its own engine.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.extraction import EXTRACT_SCRIPT, load_extraction, run_script
from patchwheel.verify.generator.plan import DEFAULT_CALLS, VerifyPlan
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.models.families import FamilySpec, make_family_model, read_card
from patchwheel.verify.oracles.compare import (
    Calls,
    Extracted,
    Reference,
    TensorCheck,
    as_reference,
    compare_all,
    max_error_per_layer,
)
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream
from patchwheel.verify.payloads import script

EXTRACT_GPU_SCRIPT = script("extract_gpu")
ORACLE_SCRIPT = EXTRACT_SCRIPT.with_name("oracle.py")
TIMEOUT_S = 600
LAYERS = (0, 1, 2, 3)  # every layer of the 4-layer family models
# Long prompts: every one spans several 256-token steps, whatever a platform does to the budget.
LONG_CALL = (1499, 999, 699, 299)


@dataclass(frozen=True)
class Side:
    """What one side (extraction or the vLLM oracle) returned, as read back."""

    results: list[list[Extracted]]
    info: dict[str, Any]
    wall_s: float


def family_plan(spec: FamilySpec, dtype: str) -> VerifyPlan:
    """The verify plan's prompts (plus the long call) and step budget, every layer."""
    return VerifyPlan(
        dtype=dtype,
        layer_ids=LAYERS,
        calls=(*DEFAULT_CALLS, LONG_CALL),
        spec=spec.tokenizer_spec,
        gpu_memory_utilization=0.3,
    )


def requested_settings(plan: VerifyPlan, tp: int) -> dict[str, Any]:
    """The settings both vLLM sides are asked for (each records what its engine used)."""
    return {**plan.oracle_settings(), "tensor_parallel_size": tp}


def extract_family(
    options: GpuOptions, runtime: Runtime, family: str, tp: int, console: Console
) -> tuple[VerifyPlan, Path, Calls, dict[str, Any], dict[str, Any], Side]:
    """The family's model and prompts, and speculators' extraction of them at TP ``tp`` into
    ``families/<family>/extraction-tp<tp>``; refuse a generator that ignores a setting."""
    spec = FamilySpec(family)
    plan = family_plan(spec, options.dtype)
    root = options.work_dir / "families" / family
    with console.status(f"{family}: generating the seeded model"):
        model_dir = make_family_model(spec, root / "model")
    calls = plan.prompts(model_dir)
    settings = requested_settings(plan, tp)
    extraction_kwargs = {
        **{k: v for k, v in settings.items() if k != "max_num_seqs"},
        "enforce_eager": options.extraction_eager,
    }
    extraction = _run_side(
        runtime,
        EXTRACT_GPU_SCRIPT,
        {
            "model_dir": str(model_dir),
            "layer_ids": list(LAYERS),
            "generator": extraction_kwargs,
            "calls": calls,
        },
        root / f"extraction-tp{tp}",
        calls,
        f"{family} extraction at tensor parallel {tp}",
        console,
    )
    unsupported = extraction.info.get("unsupported_generator_kwargs") or []
    if unsupported:
        raise VerifyError(
            f"{family}: speculators' VllmHiddenStatesGenerator does not accept "
            f"{', '.join(unsupported)}: the extraction would have run without these settings "
            "(is the series missing the patch that adds them?)"
        )
    return plan, model_dir, calls, settings, extraction_kwargs, extraction


def check_family(
    options: GpuOptions, runtime: Runtime, family: str, tp: int, console: Console
) -> dict[str, Any]:
    """Extraction of one family at TP ``tp`` against transformers and the vLLM oracle."""
    plan, model_dir, calls, settings, extraction_kwargs, extraction = extract_family(
        options, runtime, family, tp, console
    )
    root = options.work_dir / "families" / family
    oracle = _run_side(
        runtime,
        ORACLE_SCRIPT,
        {
            "model_dir": str(model_dir),
            "layer_ids": list(LAYERS),
            "calls": calls,
            "settings": settings,
        },
        root / f"oracle-tp{tp}",
        calls,
        f"{family} vLLM oracle at tensor parallel {tp}",
        console,
    )
    with console.status(f"{family}: transformers reference"):
        reference = transformers_reference(plan, model_dir, calls)
    vs_oracle = summary(compare_all(plan, calls, extraction.results, as_reference(oracle.results)))
    vs_oracle.update(identical(extraction.results, oracle.results))
    disagreement = summary(compare_all(plan, calls, oracle.results, reference))
    vs_transformers = summary(compare_all(plan, calls, extraction.results, reference))
    transformers_required = bool(disagreement["passed"])
    vs_transformers["role"] = (
        "required" if transformers_required else "recorded: vLLM itself disagrees with transformers"
    )
    passed = bool(vs_oracle["passed"]) and (vs_transformers["passed"] or not transformers_required)
    card = read_card(model_dir)
    return {
        "family": family,
        "tensor_parallel_size": tp,
        "passed": passed,
        "model": {
            "architecture": card["architecture"],
            "weights_sha256": card["weights_sha256"],
            "num_parameters": card["num_parameters"],
            "config": card["config"],
        },
        "layers": list(LAYERS),
        "calls": [[len(p) for p in prompts] for prompts in calls],
        "requested_settings": settings,
        "extraction": _side_record(extraction, requested={**extraction_kwargs}),
        "vllm_oracle": _side_record(oracle, requested={**settings, "enforce_eager": True}),
        "extraction_vs_vllm_oracle": vs_oracle,
        "extraction_vs_transformers": vs_transformers,
        "vllm_oracle_vs_transformers": disagreement,
    }


def _side_record(side: Side, requested: dict[str, Any]) -> dict[str, Any]:
    info = side.info
    effective = info.get("effective_settings")
    record: dict[str, Any] = {
        "requested_settings": requested,
        "effective_settings": effective,
        "workers": info.get("workers"),
        "startup_s": round(float(info["startup_seconds"]), 2),
        "generate_s": [round(float(c["seconds"]), 3) for c in info["calls"]],
        "process_wall_s": round(side.wall_s, 1),
    }
    if "workers_error" in info:
        record["workers_error"] = info["workers_error"]
    if any("stats" in c for c in info["calls"]):
        record["steps"] = [c.get("stats") for c in info["calls"]]
        record["rank_differences"] = [c.get("ranks") for c in info["calls"]]
    if effective is not None:
        record["settings_not_honoured"] = settings_not_honoured(requested, effective)
    return record


def settings_not_honoured(requested: dict[str, Any], effective: dict[str, Any]) -> dict[str, Any]:
    """Requested settings the engine runs with another value: name -> [asked, got]."""
    keys = ("max_num_batched_tokens", "tensor_parallel_size", "dtype", "enforce_eager")
    return {
        k: [requested[k], effective.get(k)]
        for k in keys
        if requested.get(k) is not None and effective.get(k) != requested[k]
    }


def _run_side(
    runtime: Runtime,
    script: Path,
    request: dict[str, Any],
    out_dir: Path,
    calls: Calls,
    label: str,
    console: Console,
) -> Side:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    request_path = out_dir / "request.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    with console.status(label):
        wall, log = run_script(
            runtime.python,
            script,
            request_path,
            out_dir,
            env=runtime.env,
            timeout_s=TIMEOUT_S,
            label=label,
        )
    extraction = load_extraction(out_dir, calls, wall, log)
    info: dict[str, Any] = json.loads((out_dir / "result.json").read_text(encoding="utf-8"))
    console.print(f"{label}: {wall:.0f} s")
    return Side(results=extraction.results, info=info, wall_s=wall)


# --------------------------------------------------------------------------- comparing


def transformers_reference(plan: VerifyPlan, model_dir: Path, calls: Calls) -> Reference:
    """The residual stream of every call's prompts, computed by transformers."""
    model = load_reference_model(model_dir, plan.dtype)
    return [residual_stream(model, prompts, plan.layer_ids) for prompts in calls]


def summary(checks: list[TensorCheck]) -> dict[str, Any]:
    """Max abs error per layer, the worst error / tolerance ratio, the first failures."""
    failures = [c for c in checks if not c.ok]
    ratios = [
        c.max_abs_error / c.tolerance for c in checks if c.max_abs_error is not None and c.tolerance
    ]
    return {
        "passed": not failures,
        "checks": len(checks),
        "failures": len(failures),
        "max_abs_error_per_layer": {str(k): v for k, v in max_error_per_layer(checks).items()},
        "worst_error_over_tolerance": max(ratios) if ratios else None,
        "first_failures": [c.describe() for c in failures[:5]],
    }


def identical(a: list[list[Extracted]], b: list[list[Extracted]]) -> dict[str, int]:
    """How many tensors of ``a`` equal ``b``'s bit for bit."""
    import torch

    same = total = 0
    for call_a, call_b in zip(a, b, strict=True):
        for ra, rb in zip(call_a, call_b, strict=True):
            for ta, tb in zip(ra.hidden_states, rb.hidden_states, strict=True):
                total += 1
                same += int(ta.shape == tb.shape and torch.equal(ta, tb))
    return {"bitwise_identical": same, "tensors": total}
