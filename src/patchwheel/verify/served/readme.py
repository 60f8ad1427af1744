"""README's figures of the served generation's CPU verification, written from its report.

``python -m patchwheel.verify.served.readme build/<T>/verify-cpu.json README.md`` rewrites the
block between README's ``<!-- verify-served -->`` and ``<!-- /verify-served -->`` markers: each
server's connector, start-up and files against transformers, the generator comparison, the
stages with their seconds and the training side's figures.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify import readme_block
from patchwheel.verify.served.report import read_served_report

START = "<!-- verify-served -->"
END = "<!-- /verify-served -->"


def _worst(errors: dict[str, float]) -> str:
    return ", ".join(f"{k}: {float(v):.1e}" for k, v in errors.items())


def block(data: dict[str, Any]) -> str:
    """The Markdown block for one served report."""
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
            f"| {run['files']} ({run['stored']}) | {_worst(checks['max_abs_error_per_layer'])} "
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
            f"tensors in tolerance (max abs error {_worst(generator['max_abs_error_per_layer'])}, "
            "bfloat16 files)."
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


def rewrite(report: Path, readme: Path) -> None:
    """Replace README's verify-served block with the report's figures."""
    readme_block.replace(readme, START, END, block(read_served_report(report)))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        rewrite(Path(args[0]), Path(args[1]))
    except VerifyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
