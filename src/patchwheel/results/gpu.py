"""Pages of the GPU reports (``nox -s gpu``): the generator generation's verify-gpu.json
(schemas 1 to 3) and the served generation's, each through the summary the session itself
writes beside its JSON."""

from __future__ import annotations

from typing import Any

from patchwheel.errors import ResultsError, VerifyError
from patchwheel.results.catalog import Report
from patchwheel.results.markdown import demote_title, table

# Not exported by patchwheel.verify (its package declares no public names yet): the summaries
# the GPU sessions write beside their JSON, and the served session's judge.
from patchwheel.verify.reports import check_gpu_report as check_schema
from patchwheel.verify.reports import gpu_report_summary as markdown_summary
from patchwheel.verify.reports import judge_served_gpu_report as judge
from patchwheel.verify.reports import served_gpu_report_summary as summary


def status(report: Report) -> str:
    """The report's status; a served report's judged again from all it holds."""
    data = report.data
    if report.generation == "served":
        interrupted = any(r.get("interrupted") for r in data.get("runs") or [])
        return judge(data, [data["error"]] if data.get("error") else [], interrupted=interrupted)
    return str(data.get("status"))


def title(report: Report) -> str:
    """Target, generation, vLLM version and tensor parallel size (the run's group), day."""
    _, generation, vllm, tp = report.group
    day = report.started[:10]
    return (
        f"GPU, {report.data.get('target')} ({generation} generation, vLLM {vllm}, "
        f"TP {tp.removeprefix('tp')}), {day}"
    )


def body(report: Report) -> list[str]:
    data = report.data
    if report.generation == "served":
        return demote_title(summary(data))
    if data.get("schema") == 1:
        return _schema_1(data)
    try:
        check_schema(data)
    except VerifyError as exc:
        raise ResultsError(f"{report.source}: {exc}") from exc
    return demote_title(markdown_summary(data))


def _schema_1(data: dict[str, Any]) -> list[str]:
    """The first GPU reports (2026-11-30): one call, correctness per tensor parallel size and
    throughput; written before the session wrote a summary of its own."""
    gpu = data.get("gpu") or {}
    lines = [
        f"{data.get('date')}, {data.get('dtype')} (tolerance {data.get('rtol')} x the tensor's "
        f"largest magnitude), layers {data.get('layers')}, status **{data.get('status')}**. "
        "Schema 1 (the first GPU session's).",
        "",
        "## Machine",
        "",
        *table(
            ["GPU", "driver, CUDA", "torch", "python"],
            [
                [
                    f"{gpu.get('count')} x {gpu.get('name')} ({gpu.get('sm')}, "
                    f"{gpu.get('memory_gib')} GiB)",
                    f"{gpu.get('driver')}, CUDA {gpu.get('cuda')}",
                    gpu.get("torch"),
                    gpu.get("python"),
                ]
            ],
        ),
        "",
        *table(
            ["wheel", "sha256"],
            [[p.get("filename"), p.get("sha256")] for p in data.get("packages") or []],
        ),
        "",
        "## Correctness (max abs error per layer)",
        "",
        *table(
            ["TP", "step budget", "max abs error per layer", "checks", "failed", "seconds"],
            [
                [
                    c.get("tensor_parallel_size"),
                    c.get("max_num_batched_tokens"),
                    ", ".join(
                        f"{k}: {float(v):.2g}"
                        for k, v in (c.get("max_abs_error_per_layer") or {}).items()
                    ),
                    c.get("checks"),
                    len(c.get("failed") or []),
                    c.get("wall_s"),
                ]
                for c in data.get("correctness") or []
            ],
        ),
    ]
    thr = data.get("throughput") or {}
    if thr:
        sides = {k: v for k, v in thr.items() if isinstance(v, dict) and "tokens_per_s" in v}
        lines += [
            "",
            f"## Throughput ({thr.get('prompts')} x {thr.get('prompt_len')} tokens, "
            f"{thr.get('model')})",
            "",
            *table(
                ["side", "tokens/s"],
                [[name, f"{float(v['tokens_per_s']):,.0f}"] for name, v in sides.items()],
            ),
        ]
        ratios = {k: v for k, v in thr.items() if k.startswith("ratio")}
        if ratios:
            lines += ["", ", ".join(f"{k}: {v}" for k, v in ratios.items()) + "."]
    if data.get("error"):
        lines += ["", f"**error:** {data['error']}"]
    lines += ["", f"Wall time {data.get('wall_s')} s."]
    return lines
