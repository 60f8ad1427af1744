"""Pages of the CPU verification reports (``nox -s verify``, copied from build/<T>/verify-cpu.json
into reports/cpu/): the generator generation's and the served generation's.

Each report is read by verify's own reader first, so a hand-edited file (a key verify never
writes, one it always writes missing) is refused rather than published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patchwheel.errors import ResultsError, VerifyError
from patchwheel.results.catalog import Report

# Not exported by patchwheel.verify: its readers of the two generations' reports.
from patchwheel.verify.reports import read_report, read_served_report


def checked(report: Report, root: Path) -> dict[str, Any]:
    """The report as verify's reader accepts it; ResultsError naming the file otherwise."""
    reader = read_served_report if report.generation == "served" else read_report
    try:
        return reader(root / report.source)
    except VerifyError as exc:
        raise ResultsError(f"{report.source}: {exc}") from exc


def title(report: Report) -> str:
    return f"CPU, {report.data.get('target')} ({report.generation} generation), {report.stem}"


def body(data: dict[str, Any], generation: str) -> list[str]:
    return (served_block(data) if generation == "served" else generator_block(data)).splitlines()


def _worst(summary: dict[str, Any]) -> str:
    worst = max(summary["max_abs_error_per_layer"].values(), default=0.0)
    bound = "bitwise equal" if worst == 0.0 else f"≤ {worst:.1e}"
    return f"{summary['checks'] - summary['failed_count']}/{summary['checks']}, {bound}"


def generator_block(data: dict[str, Any]) -> str:
    """Per family both comparisons, the user's path stages with seconds, the install's time."""
    rows = [
        "| family | extraction vs transformers | extraction vs the vLLM oracle | seconds |",
        "| --- | --- | --- | --- |",
    ]
    for family in data["families"]:
        seconds = family["seconds"]
        rows.append(
            f"| {family['family']} (`{family['architecture']}`) "
            f"| {_worst(family['extraction_vs_transformers'])} "
            f"| {_worst(family['extraction_vs_vllm_oracle'])} "
            f"| {seconds['extraction']:.0f} + {seconds['vllm_oracle']:.0f} |"
        )
    lines = ["\n".join(rows), ""]
    errors = data["max_abs_error_per_layer"]
    lines.append(
        f"Status **{data['status']}** ({data['dtype']}, step budget "
        f"{data['max_num_batched_tokens']} tokens). Default tiny Llama: max abs error per layer "
        + ", ".join(f"{float(v):.1e}" for v in errors.values())
        + f"; {sum(c['ok'] for c in data['checks'])}/{len(data['checks'])} tensors in tolerance."
    )
    install = data.get("install")
    if install is not None:
        lines.append(
            f"Consumer install ({len(install['commands'])} commands): {install['seconds']:.0f} s."
        )
    user = data.get("user_path")
    if user is not None:
        stages = ", ".join(f"{k} {float(v):.1f}" for k, v in user["stage_seconds"].items())
        hidden = user["hidden_states"]
        lines.append(
            f"User's path {user['status']} (seconds: {stages}); {len(user['data_files'])} files, "
            f"{hidden['checks']} hidden-state checks against transformers, "
            f"{len(hidden['failed'])} failed; draft forward "
            + ("compiled" if (user.get("forward") or {}).get("compiled") else "eager")
            + "."
        )
    if data.get("wall_s") is not None:
        lines.append(
            f"Verify wall time {float(data['wall_s']) / 60:.1f} min (install to report; "
            "family seconds: extraction + oracle processes)."
        )
    return "\n".join(lines)


def _errors(errors: dict[str, float]) -> str:
    return ", ".join(f"{k}: {float(v):.1e}" for k, v in errors.items())


def served_block(data: dict[str, Any]) -> str:
    """Each server's connector, start-up and files against transformers, the generator
    comparison, the stages with their seconds and the training side's figures."""
    served = data["served"] or {}
    rows = [
        "| connector (`kv_connector`) | ready s | generate s | files (stored) "
        "| vs transformers: max abs error per vLLM layer id | failed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in served.get("connectors", []):
        checks = run["vs_transformers"]
        rows.append(
            f"| {run['name']} (`{run['kv_transfer_config'].get('kv_connector')}`) "
            f"| {float(run['ready_s'] or 0):.0f} | {float(run['generate_s'] or 0):.0f} "
            f"| {run['files']} ({run['stored']}) | {_errors(checks['max_abs_error_per_layer'])} "
            f"| {len(checks['failed'])}/{checks['checks']} |"
        )
    lines = ["\n".join(rows), ""]
    lines.append(
        f"Status **{data['status']}** ({served.get('dtype')}, vLLM layer ids "
        f"{served.get('layer_ids')} = decoder layers {served.get('decoder_layers')}; "
        f"`--enable-scale-out`: {'given' if served.get('scale_out_flag') else 'not needed'}). "
        f"prepare-data wrote {served.get('rows')} rows"
        + (
            ", one per assistant turn as the chat template gives."
            if served.get("preprocessing_matches_template")
            else ", NOT as the chat template gives."
        )
    )
    generator = served.get("generator")
    if generator is not None:
        lines.append(
            f"Against the generator generation's files of the same model: {generator['samples']} "
            f"samples, {generator['checks'] - len(generator['failed'])}/{generator['checks']} "
            f"tensors in tolerance (max abs error {_errors(generator['max_abs_error_per_layer'])}"
            ", bfloat16 files)."
        )
    elif data.get("cross_generation"):
        lines.append(f"Against the generator generation: {data['cross_generation']}.")
    pipeline = served.get("pipeline") or {}
    forward = pipeline.get("forward") or {}
    if forward:
        lines.append(
            f"speculators' training side: draft vocabulary {pipeline.get('draft_vocab_size')}, "
            f"target layers {pipeline.get('target_layer_ids')}, {pipeline.get('batches')} "
            f"batches read, forward loss {float(forward['loss']):.3f}."
        )
    stages = ", ".join(f"{k} {float(v):.0f}" for k, v in served.get("stage_seconds", {}).items())
    install = data.get("install") or {}
    lines.append(
        f"Seconds: {stages}"
        + (f"; consumer install {float(install['seconds']):.0f}" if install else "")
        + f". Verify wall time {float(data.get('wall_s') or 0) / 60:.1f} min."
    )
    return "\n".join(lines)
