"""``verify-gpu.json``: what the GPU session measured (only fields this code writes, checked
against one schema), and ``verify-gpu.md``, its human-readable summary beside it.

One report may gather several calls of the session on the same build (``--stages``: e.g. the
families and training in one call, the timings in the next, as a device's time limit per call
requires): a call keeps the blocks of the stages it does not run, and the families it does
not check again, from a report at the same path of the same target, inputs hash, TP size,
dtype and installed wheels, and lists itself under ``runs``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchwheel import atomic
from patchwheel.errors import VerifyError
from patchwheel.portable import Roots, portable
from patchwheel.verify.models.families import FAMILIES

REPORT_NAME = "verify-gpu.json"
SUMMARY_NAME = "verify-gpu.md"
SCHEMA = 3
KEYS_V2 = frozenset(
    {
        "schema",
        "kind",
        "target",
        "inputs",
        "status",
        "date",
        "machine",
        "packages",
        "dtype",
        "rtol",
        "tensor_parallel_size",
        "families",
        "training",
        "throughput",
        "runs",
        "error",
    }
)
# Schema 3 adds what the child processes ran with (environment), what they imported (imports)
# and speculators' own scripts run as a user runs them (user_job). Committed schema-2 reports
# stay readable.
KEYS = KEYS_V2 | {"environment", "imports", "user_job"}
FAMILY_KEYS = frozenset(
    {
        "family",
        "tensor_parallel_size",
        "passed",
        "model",
        "layers",
        "calls",
        "requested_settings",
        "extraction",
        "vllm_oracle",
        "extraction_vs_vllm_oracle",
        "extraction_vs_transformers",
        "vllm_oracle_vs_transformers",
    }
)
PROFILE_COLUMNS = ("step_host", "rpc_wait", "record", "copies", "synchronisation", "scheduler")


@dataclass
class GpuReport:
    """The content of verify-gpu.json."""

    target: str
    inputs: str | None = None  # the inputs hash of the build verified (manifest.json)
    machine: dict[str, Any] = field(default_factory=dict)
    packages: list[dict[str, Any]] = field(default_factory=list)
    dtype: str = "bfloat16"
    rtol: float = 0.0
    tensor_parallel_size: int = 1
    families: list[dict[str, Any]] = field(default_factory=list)
    training: dict[str, Any] = field(default_factory=dict)
    throughput: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    imports: dict[str, Any] = field(default_factory=dict)
    user_job: dict[str, Any] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    date: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d"))

    @property
    def status(self) -> str:
        """passed, failed (a check failed or a stage errored) or incomplete (a family, the
        training or the throughput not run yet)."""
        if self.error is not None or any(not f["passed"] for f in self.families):
            return "failed"
        if self.training and not self.training.get("passed"):
            return "failed"
        if self.throughput and "error" in self.throughput:
            return "failed"
        if self.imports and not self.imports.get("passed", False):
            return "failed"
        if self.user_job and not self.user_job.get("passed", False):
            return "failed"
        checked = {f["family"] for f in self.families}
        if not set(FAMILIES) <= checked or not self.training or not self.throughput:
            return "incomplete"
        return "passed"

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data."""
        return {
            "schema": SCHEMA,
            "kind": "verify-gpu",
            "target": self.target,
            "inputs": self.inputs,
            "status": self.status,
            "date": self.date,
            "machine": self.machine,
            "packages": self.packages,
            "dtype": self.dtype,
            "rtol": self.rtol,
            "tensor_parallel_size": self.tensor_parallel_size,
            "families": self.families,
            "training": self.training,
            "throughput": self.throughput,
            "environment": self.environment,
            "imports": self.imports,
            "user_job": self.user_job,
            "runs": self.runs,
            "error": self.error,
        }

    def keep_from(
        self, path: Path, stages: tuple[str, ...], rerun_families: tuple[str, ...] = ()
    ) -> None:
        """Take the other stages' blocks, the families not checked again and the runs from an
        earlier report of the same build."""
        try:
            old = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(old, dict) or old.get("schema") != SCHEMA:
            return
        same = (
            old.get("target") == self.target
            and old.get("inputs") == self.inputs
            and old.get("tensor_parallel_size") == self.tensor_parallel_size
            and old.get("dtype") == self.dtype
            and _shas(old.get("packages")) == _shas(self.packages)
        )
        if not same:
            return
        # Families: every earlier one this call does not check again (a call that ran out of
        # time leaves the rest to the next).
        self.families = [
            f for f in old.get("families") or [] if f.get("family") not in rerun_families
        ]
        if "training" not in stages:
            self.training = dict(old.get("training") or {})
        if "throughput" not in stages:
            self.throughput = dict(old.get("throughput") or {})
        if "userjob" not in stages:
            self.user_job = dict(old.get("user_job") or {})
        self.imports = dict(old.get("imports") or {})
        self.runs = [*list(old.get("runs") or []), *self.runs]


def _shas(packages: object) -> list[str]:
    if not isinstance(packages, list):
        return []
    return sorted(str(p.get("sha256")) for p in packages if isinstance(p, dict))


def check_schema(data: dict[str, Any]) -> None:
    """Refuse a report with a key this code does not write (or without one it does)."""
    problems = []
    keys = KEYS_V2 if data.get("schema") == 2 else KEYS
    if data.get("schema") not in (2, SCHEMA):
        problems.append(f"schema {data.get('schema')!r} (this code writes {SCHEMA}, reads 2)")
    if set(data) != keys:
        problems.append(
            f"top level: extra {sorted(set(data) - keys)}, missing {sorted(keys - set(data))}"
        )
    for i, family in enumerate(data.get("families") or []):
        if set(family) != FAMILY_KEYS:
            problems.append(
                f"families[{i}]: extra {sorted(set(family) - FAMILY_KEYS)}, "
                f"missing {sorted(FAMILY_KEYS - set(family))}"
            )
    if problems:
        raise VerifyError("verify-gpu.json does not follow its schema: " + "; ".join(problems))


def write_report(report: GpuReport, path: Path, started: float, roots: Roots | None = None) -> None:
    """Write verify-gpu.json and verify-gpu.md beside it (atomically, schema-checked), every
    path under one of ``roots`` written by its folder's name (:mod:`patchwheel.portable`)."""
    if report.runs:
        report.runs[-1]["wall_s"] = round(time.monotonic() - started, 1)
    data = portable(report.to_json(), roots or [])
    check_schema(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, data)
    atomic.write_text(path.with_name(SUMMARY_NAME), markdown_summary(data))


# --------------------------------------------------------------------------- the summary


def _errors(per_layer: dict[str, float]) -> str:
    return ", ".join(f"{k}: {v:.2g}" for k, v in per_layer.items()) or "-"


def markdown_summary(data: dict[str, Any]) -> str:
    """A human-readable Markdown summary of a verify-gpu.json."""
    machine = data["machine"]
    gpu = machine.get("gpu") or {}
    versions = machine.get("versions") or {}
    lines = [
        f"# verify-gpu: {data['target']} ({data['status']})",
        "",
        f"{data['date']}, build inputs `{data['inputs']}`, tensor parallel "
        f"{data['tensor_parallel_size']}, {data['dtype']} (tolerance {data['rtol']:.3g} x the "
        "tensor's largest magnitude). Written by `python -m patchwheel.verify.gpu`.",
        "",
        "## Machine",
        "",
        "| | |",
        "| --- | --- |",
        f"| GPU | {gpu.get('count')} x {gpu.get('name')} ({gpu.get('sm')}, "
        f"{gpu.get('memory_gib')} GiB) |",
        f"| driver, CUDA | {gpu.get('driver')}, CUDA {gpu.get('cuda')} |",
        "| versions | " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + " |",
    ]
    for p in data["packages"]:
        lines.append(f"| {p['filename']} | sha256 `{p['sha256']}` |")
    if data["families"]:
        lines += [
            "",
            "## Model families (max abs error per layer)",
            "",
            "| family | TP | vs vLLM oracle | bitwise | vs transformers | vLLM vs transformers "
            "| extraction engine | passed |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for f in data["families"]:
            ora = f["extraction_vs_vllm_oracle"]
            tra = f["extraction_vs_transformers"]
            dis = f["vllm_oracle_vs_transformers"]
            eff = f["extraction"].get("effective_settings") or {}
            workers = f["extraction"].get("workers") or [{}]
            engine = (
                f"{', '.join(workers[0].get('attention', []))}; "
                f"compilation {eff.get('compilation_mode')}, cudagraphs "
                f"{eff.get('cudagraph_mode')}, {eff.get('max_num_batched_tokens')}-token steps"
            )
            lines.append(
                f"| {f['family']} | {f['tensor_parallel_size']} | "
                f"{_errors(ora['max_abs_error_per_layer'])} ({ora['failures']} failed) | "
                f"{ora['bitwise_identical']}/{ora['tensors']} | "
                f"{_errors(tra['max_abs_error_per_layer'])} ({tra['failures']} failed; "
                f"{tra.get('role')}) | {_errors(dis['max_abs_error_per_layer'])} | {engine} | "
                f"{'yes' if f['passed'] else 'NO'} |"
            )
    training = data.get("training") or {}
    if training:
        lines += ["", "## Training (speculators' EAGLE-3 trainer on the extracted files)", ""]
        if "error" in training:
            lines.append(f"error: {training['error']}")
        else:
            lines.append(
                f"{training.get('steps')} optimizer steps on {training.get('device_name')}: "
                f"loss {training.get('loss_before'):.4g} -> {training.get('loss_after'):.4g} "
                f"({'decreased' if training.get('passed') else 'DID NOT DECREASE'})"
            )
    thr = data.get("throughput") or {}
    if thr:
        lines += _throughput_lines(thr)
    if data.get("user_job"):
        lines += _user_job_lines(data["user_job"])
    if data.get("environment"):
        lines += _environment_lines(data["environment"])
    if data.get("imports"):
        lines += _imports_lines(data["imports"])
    if data.get("error"):
        lines += ["", f"**error:** {data['error']}"]
    lines += ["", "## Runs", ""]
    for run in data["runs"]:
        lines.append(
            f"- {run.get('started')}: stages {', '.join(run.get('stages', []))}, "
            f"{run.get('wall_s')} s"
        )
    return "\n".join(lines) + "\n"


def _throughput_lines(thr: dict[str, Any]) -> list[str]:
    if "error" in thr:
        return ["", "## Throughput", "", f"error: {thr['error']}"]
    lines = [
        "",
        f"## Throughput ({thr['prompts']} x {thr['prompt_len']} tokens, {thr['model']})",
        "",
        f"Start-up: {thr.get('startup_definition')}.",
        "",
        "| side | tokens/s | ratio vs compiled default | start-up s | effective settings |",
        "| --- | --- | --- | --- | --- |",
    ]
    base = (thr["sides"].get("vllm-default") or {}).get("tokens_per_s")
    for name, side in thr["sides"].items():
        eff = side.get("effective_settings") or {}
        ratio = f"{side['tokens_per_s'] / base:.3f}" if base else "-"
        lines.append(
            f"| {name} | {side['tokens_per_s']:,.0f} | {ratio} | {side['startup_s']:.1f} | "
            f"eager {eff.get('enforce_eager')}, compilation {eff.get('compilation_mode')}, "
            f"cudagraphs {eff.get('cudagraph_mode')}, prefix caching "
            f"{eff.get('prefix_caching')}, {eff.get('max_num_batched_tokens')}-token steps |"
        )
    goal = thr.get("goal")
    if goal:
        lines += [
            "",
            f"Goal: extraction >= {goal['min_ratio']} x compiled default: ratio "
            f"{goal['ratio']} ({'met' if goal['met'] else 'NOT met'}).",
        ]
    if thr.get("end_to_end"):
        lines += _end_to_end_lines(thr["end_to_end"])
    profiles = {n: s["profile"] for n, s in thr["sides"].items() if s.get("profile")}
    if profiles:
        lines += [
            "",
            "### Where the time goes (driver process, one profiled pass; seconds)",
            "",
            "| side | pass | start-up phases | " + " | ".join(PROFILE_COLUMNS) + " |",
            "| --- | --- | --- | " + " | ".join("---" for _ in PROFILE_COLUMNS) + " |",
        ]
        for name, prof in profiles.items():
            cats = prof.get("categories_s", {})
            side_phases = thr["sides"][name].get("startup_phases_s") or {}
            phases = ", ".join(f"{k} {v:.1f}" for k, v in side_phases.items())
            lines.append(
                f"| {name} | {prof.get('pass_s', 0.0):.2f} | {phases} | "
                + " | ".join(f"{cats.get(c, 0.0):.2f}" for c in PROFILE_COLUMNS)
                + " |"
            )
    return lines


def _end_to_end_lines(e2e: dict[str, Any]) -> list[str]:
    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [
        "",
        "### The user's job: tokens -> training files",
        "",
        f"The extraction side's generator, writing `data_<i>.pt` files {e2e['writer']}; "
        "a pass ends when every save has returned (with sync: until `os.sync()` returned).",
        "",
        "| path | tokens/s | ratio vs compiled default | written GB/s | disk's write bandwidth "
        "GB/s (measured) | saving alone GB/s | with sync tokens/s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| in memory, one call | {e2e['in_memory_tokens_per_s']:,.0f} | "
        f"{ratio(e2e['in_memory_ratio_vs_default'])} | - | - | - | - |",
        f"| in memory, batches of 8 | {e2e['in_memory_batched_tokens_per_s']:,.0f} | "
        f"{ratio(e2e['in_memory_batched_ratio_vs_default'])} | - | - | - | - |",
    ]
    for label, f in e2e["files"].items():
        fs = f.get("filesystem") or {}
        lines.append(
            f"| files, {'RAM disk' if label == 'ram' else 'real disk'} ({fs.get('type')} at "
            f"{fs.get('mount')}) | {f['tokens_per_s']:,.0f} | {ratio(f['ratio_vs_default'])} | "
            f"{f['bytes_per_s'] / 1e9:.2f} | {f['disk_bytes_per_s'] / 1e9:.2f} | "
            f"{f['save_only_bytes_per_s'] / 1e9:.2f} | {f['durable_tokens_per_s']:,.0f} |"
        )
    for label, f in (e2e.get("before") or {}).items():
        lines.append(
            f"| before (--baseline-speculators), files, "
            f"{'RAM disk' if label == 'ram' else 'real disk'} | {f['tokens_per_s']:,.0f} | "
            f"{ratio(f['ratio_vs_default'])} | - | - | {f['save_only_bytes_per_s'] / 1e9:.2f} | - |"
        )
    sizes = ", ".join(f"{k} x{v['bytes_vs_hidden_states']}" for k, v in e2e["files"].items())
    lines += ["", f"Files' bytes over the hidden states they hold: {sizes}."]
    goal = e2e.get("goal")
    if goal:
        lines.append(
            f"Goal: the user's job on the RAM disk >= {goal['min_ratio']} x compiled default: "
            f"ratio {goal['ratio']} ({'met' if goal['met'] else 'NOT met'})."
        )
    return lines


def _user_job_lines(job: dict[str, Any]) -> list[str]:
    lines = ["", "## speculators' own scripts, as a user runs them", ""]
    if "error" in job:
        return [*lines, f"error: {job['error']}"]
    lines.append(
        f"{job.get('scripts')} (speculators {job.get('tag')}, each file's sha256 checked), "
        f"with nothing but {job.get('environment_source')}'s environment "
        "(and the import trace):"
    )
    lines += ["", "| script | exit | seconds | result |", "| --- | --- | --- | --- |"]
    for step in job.get("steps", []):
        lines.append(
            f"| {step['script']} | {step['exit']} | {step['seconds']:.1f} | "
            f"{step.get('result', '')} |"
        )
    return lines


def _environment_lines(env: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## What the child processes ran with",
        "",
        f"The user's environment: {env.get('user_source')} "
        f"({', '.join(env.get('user_variables') or []) or 'no variable'}).",
    ]
    for kind in ("harness", "user_job"):
        set_vars = env.get(kind) or {}
        if set_vars:
            lines.append(
                f"Set for {kind.replace('_', ' ')} runs: "
                + "; ".join(f"{k} ({v})" for k, v in set_vars.items())
                + "."
            )
    inherited = env.get("inherited") or {}
    lines.append(
        "Inherited from the caller's environment (vLLM, torch, CUDA, Hugging Face): "
        + (", ".join(f"{k}={v}" for k, v in inherited.items()) or "none")
        + "."
    )
    return lines


def _imports_lines(imports: dict[str, Any]) -> list[str]:
    lines = ["", "## Imports on the verified path (import trace)", ""]
    if "error" in imports:
        return [*lines, f"error: {imports['error']}"]
    lines += [
        "| run | processes | top-level modules | distributions |",
        "| --- | --- | --- | --- |",
    ]
    for run in imports.get("runs", []):
        lines.append(
            f"| {run['run']} | {run['processes']} | {len(run['modules'])} | "
            f"{', '.join(run['distributions'])} |"
        )
    lines += ["", "| dropped requirement | imported by | looked for by |", "| --- | --- | --- |"]
    for d in imports.get("dropped", []):
        lines.append(
            f"| {d['name']} | {', '.join(d['imported_by']) or 'none'} | "
            f"{', '.join(d['looked_for_by']) or 'none'} |"
        )
    verdict = "passed" if imports.get("passed") else "FAILED: " + "; ".join(imports["violations"])
    lines += ["", f"Drop list check: {verdict}."]
    kernels = imports.get("kernels") or {}
    if kernels.get("loaded"):
        lines += [
            "",
            f"CUDA modules of the build loaded on {kernels['device']} "
            f"(compute capability {kernels.get('capability')}):",
            "",
            "| module | runs as | loaded by |",
            "| --- | --- | --- |",
        ]
        for k in kernels["loaded"]:
            lines.append(f"| {k['module']} | {k['runs_as']} | {', '.join(k['by'])} |")
    return lines
