"""The verification report: `verify-cpu.json` for machines, a rich summary for people."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from patchwheel import atomic
from patchwheel.errors import VerifyError
from patchwheel.verify.oracles.compare import TensorCheck, max_error_per_layer


@dataclass(frozen=True)
class PackageRecord:
    """A distribution in the verify venv; sha256/files_checked only for the built wheels."""

    distribution: str
    version: str
    filename: str | None = None
    sha256: str | None = None
    files_checked: int | None = None
    built_from: str | None = None


@dataclass(frozen=True)
class CallRecord:
    """One `generate` call: its prompts' token counts and its speed."""

    call: int
    prompt_tokens: list[int]
    seconds: float

    @property
    def tokens(self) -> int:
        return sum(self.prompt_tokens)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass
class VerifyReport:
    """Everything one CPU verification measured."""

    target: str
    status: str  # "passed", "mismatch" or "crashed"
    dtype: str
    rtol: float
    layers: list[int]
    max_num_batched_tokens: int
    inputs: str | None = None  # the inputs hash of the build verified (manifest.json)
    packages: list[PackageRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    checks: list[TensorCheck] = field(default_factory=list)
    startup_s: float | None = None
    extraction_wall_s: float | None = None
    wall_s: float | None = None
    error: str | None = None
    log: str | None = None
    # Per side, its own copy: {"extraction": {"requested": …, "effective": …},
    # "reference": {"effective": …}}, as each side read them back from what it ran.
    settings: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    install: dict[str, Any] | None = None  # the consumer's commands as run, seconds
    user_path: dict[str, Any] | None = None  # verify.userpath.UserPathResult.to_json()
    # verify.generator.family_check: per family, extraction vs transformers and vs the vLLM oracle.
    families: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failures(self) -> list[TensorCheck]:
        return [c for c in self.checks if not c.ok]

    @property
    def max_abs_error_per_layer(self) -> dict[int, float]:
        return max_error_per_layer(self.checks)

    @property
    def tokens_per_s(self) -> float:
        seconds = sum(c.seconds for c in self.calls)
        return sum(c.tokens for c in self.calls) / seconds if seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The JSON document written to verify-cpu.json."""
        return {
            "target": self.target,
            "inputs": self.inputs,
            "status": self.status,
            "dtype": self.dtype,
            "tolerance": {"rule": "max_abs_error <= rtol * max|reference|", "rtol": self.rtol},
            "layers": self.layers,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "settings": self.settings,
            "install": self.install,
            "user_path": self.user_path,
            "families": self.families,
            "packages": [asdict(p) for p in self.packages],
            "generate_calls": [
                {
                    "call": c.call,
                    "prompt_tokens": c.prompt_tokens,
                    "prompts_longer_than_step": sum(
                        t > self.max_num_batched_tokens for t in c.prompt_tokens
                    ),
                    "tokens": c.tokens,
                    "seconds": round(c.seconds, 4),
                    "tokens_per_s": round(c.tokens_per_s, 1),
                }
                for c in self.calls
            ],
            "max_abs_error_per_layer": {str(k): v for k, v in self.max_abs_error_per_layer.items()},
            "checks": [{**asdict(c), "ok": c.ok} for c in self.checks],
            "tokens_per_s": round(self.tokens_per_s, 1),
            "startup_s": self.startup_s,
            "extraction_wall_s": self.extraction_wall_s,
            "wall_s": self.wall_s,
            "error": self.error,
            "log": self.log,
        }


REPORT_KEYS = frozenset(
    VerifyReport("t", "crashed", "float32", 0.0, [], 0).to_json()  # the keys the code writes
)


def write_report(report: VerifyReport, path: Path) -> None:
    """Write the JSON beside its final name, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, report.to_json())


def read_report(path: Path) -> dict[str, Any]:
    """A verify-cpu.json as the code wrote it; VerifyError for anything else.

    A report is only what `write_report` writes: a key it does not write (a block added by
    hand) or one it always writes that is missing makes the file no report of a run."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VerifyError(f"{path}: not a readable verify report ({exc})") from exc
    if not isinstance(data, dict):
        raise VerifyError(f"{path}: a verify report is a JSON object")
    extra = sorted(set(data) - REPORT_KEYS)
    missing = sorted(REPORT_KEYS - set(data))
    if extra or missing:
        raise VerifyError(
            f"{path} is not a report as verify writes it: "
            + "; ".join(
                part
                for part in (
                    f"keys verify never writes: {', '.join(extra)}" if extra else "",
                    f"missing: {', '.join(missing)}" if missing else "",
                )
                if part
            )
            + ". Run the verification again instead of editing its report."
        )
    return data


_SHOWN = (
    "step_budget",
    "tensor_parallel_size",
    "workers",
    "dtype",
    "enforce_eager",
    "compilation_mode",
    "enable_prefix_caching",
    "async_scheduling",
    "model_runner",
    "attention_backends",
)


def print_summary(report: VerifyReport, console: Console) -> None:
    """Packages, per-layer errors and speed as tables, then the verdict."""
    packages = Table(title=f"verify-cpu {report.target}: installed")
    for column in ("distribution", "version", "sha256", "files re-hashed"):
        packages.add_column(column)
    for p in report.packages:
        packages.add_row(
            p.distribution,
            p.version,
            (p.sha256 or "")[:16],
            "" if p.files_checked is None else str(p.files_checked),
        )
    console.print(packages)
    if report.checks:
        layers = Table(
            title=f"max abs error vs transformers ({report.dtype}, rtol {report.rtol:.3g})"
        )
        layers.add_column("layer", justify="right")
        layers.add_column("max abs error", justify="right")
        layers.add_column("tensors", justify="right")
        layers.add_column("failed", justify="right")
        for layer, error in report.max_abs_error_per_layer.items():
            mine = [c for c in report.checks if c.layer == layer]
            layers.add_row(
                str(layer), f"{error:.3e}", str(len(mine)), str(sum(not c.ok for c in mine))
            )
        console.print(layers)
    for call in report.calls:
        longer = sum(t > report.max_num_batched_tokens for t in call.prompt_tokens)
        console.print(
            f"generate call {call.call}: {len(call.prompt_tokens)} prompts, {call.tokens} tokens "
            f"({longer} longer than max_num_batched_tokens={report.max_num_batched_tokens}), "
            f"{call.seconds:.3f} s, {call.tokens_per_s:,.0f} tokens/s"
        )
    engine = report.settings.get("extraction", {}).get("effective")
    if engine:
        console.print(
            "engine ran with: "
            + ", ".join(f"{k}={engine[k]}" for k in _SHOWN if k in engine and engine[k] is not None)
        )
    if report.startup_s is not None:
        wall = report.wall_s or 0.0
        console.print(f"generator start-up {report.startup_s:.1f} s; verify wall time {wall:.1f} s")
    for family in report.families:
        compared = ", ".join(
            f"{side} {s['checks'] - s['failed_count']}/{s['checks']} "
            f"(max abs error {max(s['max_abs_error_per_layer'].values(), default=0.0):.1e})"
            for side, s in (
                ("vs transformers", family["extraction_vs_transformers"]),
                ("vs the vLLM oracle", family["extraction_vs_vllm_oracle"]),
            )
        )
        console.print(f"family {family['family']}: {compared}")
    if report.user_path is not None:
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in report.user_path["stage_seconds"].items())
        hidden = report.user_path["hidden_states"]
        console.print(
            f"user's path {report.user_path['status']}: {stages}; "
            f"{len(report.user_path['data_files'])} files, hidden states ({hidden['dtype']}) "
            f"{hidden['checks']} checks, {len(hidden['failed'])} failed"
        )
    if report.status == "passed":
        console.print("[bold green]verify-cpu passed[/]")
    else:
        console.print(f"[bold red]verify-cpu {report.status}[/]: {report.error}")
