"""README's CPU-verification figures, written from a verify-cpu.json (never by hand).

``python -m patchwheel.verify.readme build/<T>/verify-cpu.json README.md`` rewrites the block
between README's ``<!-- verify-cpu -->`` and ``<!-- /verify-cpu -->`` markers with the
report's figures: per family both comparisons, the user's path stages with seconds, the
install command's time and the wheels installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify import readme_block
from patchwheel.verify.report import read_report

START = "<!-- verify-cpu -->"
END = "<!-- /verify-cpu -->"


def _worst(summary: dict[str, Any]) -> str:
    worst = max(summary["max_abs_error_per_layer"].values(), default=0.0)
    bound = "bitwise equal" if worst == 0.0 else f"≤ {worst:.1e}"
    return f"{summary['checks'] - summary['failed_count']}/{summary['checks']}, {bound}"


def block(data: dict[str, Any]) -> str:
    """The Markdown block for one report (status passed or not: the figures say which)."""
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


def rewrite(report: Path, readme: Path) -> None:
    """Replace README's verify-cpu block with the report's figures."""
    readme_block.replace(readme, START, END, block(read_report(report)))


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
