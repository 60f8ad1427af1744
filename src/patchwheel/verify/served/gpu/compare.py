"""The served throughput beside the generator generation's, from the same machine's report.

The served target's throughput stage compares tokens -> files with ``LLM.generate`` prefill
and with the 0.3.0 generator on the same model. When ``--generator-report`` names the
generator target's ``verify-gpu.json`` of the same machine, the same vLLM wheel, the same
benchmark model, prompts, dtype and settings, its compiled-default prefill side is the
reference (measured once, with empty compilation caches of its own) and its extraction and
user's-job figures are set beside; anything that does not match is named and the served
session measures its own prefill side instead.
"""

from __future__ import annotations

import json
from typing import Any

from patchwheel.verify.gpu.options import GpuOptions

BENCH_MODEL = "random Llama, hidden 2048, 16 layers"  # throughput.py's generated model


def generator_figures(
    options: GpuOptions, report: dict[str, Any], settings: dict[str, Any]
) -> dict[str, Any] | None:
    """``{"llm_generate_prefill": …, "generator": …}`` from the generator report, or
    ``{"refused": [reasons]}``, or None without ``--generator-report``."""
    path = options.generator_report
    if path is None:
        return None
    try:
        earlier = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        return {"refused": [f"{path}: unreadable ({exc})"]}
    if not isinstance(earlier, dict):
        return {"refused": [f"{path}: not a GPU report"]}
    throughput = earlier.get("throughput")
    sides = throughput.get("sides") if isinstance(throughput, dict) else None
    if not isinstance(throughput, dict) or not isinstance(sides, dict):
        return {"refused": [f"{path}: no throughput stage"]}
    default = sides.get("vllm-default")
    reasons = _mismatches(options, report, earlier, throughput, default, settings)
    if reasons:
        return {"refused": reasons}
    assert isinstance(default, dict)
    extraction = sides.get("extraction") or {}
    end_to_end = throughput.get("end_to_end") or {}
    files = end_to_end.get("files") or {}
    return {
        "llm_generate_prefill": {
            "tokens_per_s": default["tokens_per_s"],
            "startup_s": default["startup_s"],
            "settings": settings,
            "measured": f"by the generator target's session on this machine ({path.name}, "
            f"inputs {earlier.get('inputs')})",
        },
        "generator": {
            "target": earlier.get("target"),
            "inputs": earlier.get("inputs"),
            "layer_ids": throughput.get("layer_ids"),
            "extraction_in_memory_tokens_per_s": extraction.get("tokens_per_s"),
            "extraction_startup_s": extraction.get("startup_s"),
            "user_job_tokens_per_s": {
                label: figures.get("tokens_per_s") for label, figures in files.items()
            },
        },
    }


def _mismatches(
    options: GpuOptions,
    report: dict[str, Any],
    earlier: dict[str, Any],
    throughput: dict[str, Any],
    default: Any,
    settings: dict[str, Any],
) -> list[str]:
    reasons = []
    if not isinstance(default, dict) or not isinstance(default.get("tokens_per_s"), float):
        reasons.append("no vllm-default side (run it with --baselines default)")
    elif default.get("requested_settings") != settings:
        reasons.append(f"its prefill settings {default.get('requested_settings')} != {settings}")
    if options.model is not None or throughput.get("model") != BENCH_MODEL:
        reasons.append(f"another model ({throughput.get('model')}, --model {options.model})")
    wanted = (options.prompts, options.prompt_len, options.dtype)
    got = (throughput.get("prompts"), throughput.get("prompt_len"), earlier.get("dtype"))
    if got != wanted:
        reasons.append(f"prompts, length, dtype {got} != {wanted}")
    gpu = (report.get("machine") or {}).get("gpu") or {}
    other = ((earlier.get("machine") or {}).get("gpu")) or {}
    if (other.get("name"), other.get("count")) != (gpu.get("name"), gpu.get("count")):
        reasons.append(f"another GPU ({other.get('name')} x {other.get('count')})")
    ours = {p.get("distribution"): p.get("sha256") for p in report.get("packages") or []}
    theirs = {p.get("distribution"): p.get("sha256") for p in earlier.get("packages") or []}
    if ours.get("vllm") is None or ours.get("vllm") != theirs.get("vllm"):
        reasons.append("another vLLM wheel (sha256 differs)")
    return reasons
