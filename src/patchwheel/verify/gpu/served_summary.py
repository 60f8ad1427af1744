"""The summary (``.md``) of a served target's GPU report, written from its JSON.

``python -m patchwheel.verify.gpu.served_summary REPORT.json`` writes ``REPORT.md`` beside it
(the served session writes it after every call; the results pages, ``python -m
patchwheel.results``, show the same text). The status is judged again from what the JSON
holds (:func:`judge`), so a report written by an older session
that called an interrupted run "passed" is summarised truthfully; the JSON stays as written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from patchwheel import atomic


def judge(report: dict[str, Any], errors: list[str], *, interrupted: bool = False) -> str:
    """The report's status from everything it holds, the stages kept from earlier calls too:
    "failed" when this call or any recorded family or training failed, "interrupted" when
    the call was stopped before its stages finished, "incomplete" when a stage of the served
    session (correctness, training, throughput) has no result yet, else "passed"."""
    families = report.get("families") or {}
    training = report.get("training")
    failed = bool(errors) or any(
        not isinstance(f, dict) or f.get("status") != "passed" for f in families.values()
    )
    if isinstance(training, dict) and training.get("passed") is not True:
        failed = True
    if failed:
        return "failed"
    if interrupted:
        return "interrupted"
    if not families or training is None or report.get("throughput") is None:
        return "incomplete"
    return "passed"


def _rate(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, int | float) else "-"


def summary(report: dict[str, Any]) -> str:
    """Markdown: status, throughput against prefill and the generator, families, training."""
    interrupted = any(run.get("interrupted") for run in report.get("runs") or [])
    errors = [report["error"]] if report.get("error") else []
    status = judge(report, errors, interrupted=interrupted)
    gpu = (report.get("machine") or {}).get("gpu") or {}
    lines = [
        f"# verify-gpu: {report.get('target')} (served generation, {status})",
        "",
        f"Build inputs `{report.get('inputs')}`; {gpu.get('count')} x {gpu.get('name')}. "
        "Written by `python -m patchwheel.verify.gpu.served_summary` from the JSON beside it "
        f"(whose own status field reads {report.get('status')!r}).",
        "",
    ]
    lines += _throughput(report.get("throughput"))
    lines += [
        "## Correctness (per family)",
        "",
        "| family | status | error |",
        "| --- | --- | --- |",
    ]
    for family, result in (report.get("families") or {}).items():
        error = str(result.get("error") or "").splitlines()[0:1]
        lines.append(f"| {family} | {result.get('status')} | {' '.join(error) or '-'} |")
    if not report.get("families"):
        lines.append("| (none run) | - | - |")
    training = report.get("training")
    lines += ["", "## Training (speculators 0.9's own trainer)", ""]
    if training is None:
        lines.append("Not run.")
    else:
        served = training.get("served") or training
        error = str(served.get("error") or "").splitlines()[0:1]
        lines.append(
            f"passed: {training.get('passed', False)}; losses: {training.get('losses', [])}; "
            f"error: {' '.join(error) or '-'}"
            + (f"; judged: {training['judged']}" if training.get("judged") else "")
        )
    lines += ["", "## Runs", ""]
    for run in report.get("runs") or []:
        lines.append(
            f"- {run.get('started')}: stages {', '.join(run.get('stages') or [])}, "
            f"{run.get('wall_s')} s"
            + (" (interrupted at the call's limit)" if run.get("interrupted") else "")
        )
    return "\n".join(lines) + "\n"


def _throughput(figures: dict[str, Any] | None) -> list[str]:
    if not figures:
        return ["## Throughput", "", "Not run.", ""]
    files = figures.get("tokens_to_files") or {}
    prefill = figures.get("llm_generate_prefill") or {}
    generator = figures.get("against_generator") or {}
    jobs = generator.get("user_job_tokens_per_s") or {}
    return [
        f"## Throughput ({figures.get('prompts')} x {figures.get('prompt_len')} tokens, "
        f"{figures.get('model')}, vLLM layer ids {figures.get('layer_ids')} = decoder layers "
        f"{figures.get('decoder_layers')})",
        "",
        "| path | tokens/s | ratio vs compiled prefill | start-up s |",
        "| --- | --- | --- | --- |",
        f"| `vllm serve` + ExampleHiddenStatesConnector -> files (RAM disk), speculators' "
        f"generate-offline-data | {_rate(files.get('tokens_per_s'))} | "
        f"{figures.get('ratio_vs_prefill')} | {files.get('server_ready_s')} (server ready) |",
        f"| `LLM.generate` compiled prefill | {_rate(prefill.get('tokens_per_s'))} | 1.0 | "
        f"{_rate(prefill.get('startup_s'))} |",
        f"| 0.3.0 generator ({generator.get('target')}), in memory | "
        f"{_rate(generator.get('extraction_in_memory_tokens_per_s'))} | - | "
        f"{_rate(generator.get('extraction_startup_s'))} |",
        *(
            f"| 0.3.0 generator + speculators' offline script's saving, {disk} | {_rate(rate)} "
            "| - | - |"
            for disk, rate in jobs.items()
        ),
        "",
        f"Prefill measured {prefill.get('measured')}.",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    """Write REPORT.md beside each REPORT.json given."""
    args = list(argv if argv is not None else sys.argv[1:])
    for name in args:
        path = Path(name)
        report = json.loads(path.read_text("utf-8"))
        atomic.write_text(path.with_suffix(".md"), summary(report))
        print(path.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
