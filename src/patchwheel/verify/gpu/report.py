"""``verify-gpu.json``: what the GPU session measured, and its Markdown summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchwheel import atomic

REPORT_NAME = "verify-gpu.json"


@dataclass
class GpuReport:
    """The content of verify-gpu.json."""

    target: str
    inputs: str | None = None  # the inputs hash of the build verified (manifest.json)
    status: str = "crashed"
    gpu: dict[str, Any] = field(default_factory=dict)
    packages: list[dict[str, Any]] = field(default_factory=list)
    dtype: str = "bfloat16"
    rtol: float = 0.0
    layers: list[int] = field(default_factory=list)
    correctness: list[dict[str, Any]] = field(default_factory=list)
    throughput: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    wall_s: float = 0.0
    date: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d"))

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data."""
        return {
            "schema": 1,
            "kind": "verify-gpu",
            "target": self.target,
            "inputs": self.inputs,
            "status": self.status,
            "passed": self.status == "passed",
            "date": self.date,
            "gpu": self.gpu,
            "packages": self.packages,
            "dtype": self.dtype,
            "rtol": self.rtol,
            "layers": self.layers,
            "correctness": self.correctness,
            "throughput": self.throughput,
            "error": self.error,
            "wall_s": round(self.wall_s, 1),
        }


def write_report(report: GpuReport, path: Path, started: float) -> None:
    """Write verify-gpu.json (atomically), with the wall time since ``started``."""
    report.wall_s = time.monotonic() - started
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, report.to_json())


def markdown_table(data: dict[str, Any]) -> str:
    """A short Markdown summary of a verify-gpu.json (for the README)."""
    gpu = data["gpu"]
    rows = [
        "| | |",
        "| --- | --- |",
        f"| GPU | {gpu.get('count')} x {gpu.get('name')} ({gpu.get('sm')}), driver "
        f"{gpu.get('driver')}, CUDA {gpu.get('cuda')}, torch {gpu.get('torch')} |",
        "| wheels | "
        + ", ".join(f"{p['distribution']} {p['version']}" for p in data["packages"])
        + " |",
    ]
    for result in data["correctness"]:
        errors = ", ".join(f"{k}: {v:.2g}" for k, v in result["max_abs_error_per_layer"].items())
        rows.append(
            f"| TP {result['tensor_parallel_size']} vs transformers ({data['dtype']}) | "
            f"max abs error per layer {errors}; {result['checks']} tensors, "
            f"{len(result['failed'])} failed |"
        )
    thr = data.get("throughput") or {}
    if thr:
        rows.append(
            f"| throughput ({thr['prompts']} x {thr['prompt_len']} tokens) | extraction "
            f"{thr['extraction']['tokens_per_s']:,.0f} tok/s; "
            + "; ".join(
                f"LLM.generate {m} {thr[f'vllm_{m}']['tokens_per_s']:,.0f} tok/s "
                f"(ratio {thr[f'ratio_vs_{m}']})"
                for m in ("eager", "default")
                if f"vllm_{m}" in thr
            )
            + " |"
        )
    return "\n".join(rows) + "\n"
