"""The page of a served-paths report (``benchmarks/served_gpu.py``): four paths side by side.

On each model shape: ``LLM.generate`` prefill, vLLM's offline extraction, and ``vllm serve``
with speculators' client (the upstream release and the target's patched build) — tokens per
second, their ratios to prefill and to the offline extraction, start-up; then where the served
path's time goes, from the py-spy summary of the engine core's main thread.
"""

from __future__ import annotations

from typing import Any

from patchwheel.errors import ResultsError

__all__ = ["body", "is_served_paths", "status", "title"]

KIND = "served_gpu"
SIDES = ("prefill", "offline", "served")


def is_served_paths(data: object) -> bool:
    """Whether a benchmark report is one of ``benchmarks/served_gpu.py``'s."""
    return isinstance(data, dict) and data.get("benchmark") == KIND


def _rate(value: object) -> str:
    return f"{value:,.0f}" if isinstance(value, (int, float)) else "—"


def _shapes(data: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    shapes = data.get("shapes")
    if not isinstance(shapes, dict) or not all(isinstance(v, dict) for v in shapes.values()):
        raise ResultsError(f"{source}: a served-paths report needs an object 'shapes'")
    return shapes


def _tps(rep: dict[str, Any], side: str) -> float | None:
    value = (rep.get(side) or {}).get("tokens_per_s")
    return float(value) if isinstance(value, (int, float)) else None


def title(data: dict[str, Any]) -> str:
    return (
        f"Served paths side by side, {data.get('date')} ({(data.get('machine') or {}).get('gpu')})"
    )


def status(data: dict[str, Any], source: str) -> str:
    """The target's served path against prefill, per shape."""
    parts = []
    for shape, rep in _shapes(data, source).items():
        prefill = _tps(rep, "prefill")
        target = ((rep.get("served") or {}).get("clients") or {}).get("target") or {}
        served = target.get("tokens_per_s")
        if prefill and isinstance(served, (int, float)):
            parts.append(f"{shape}: served {served / prefill:.3f} x prefill")
    return "; ".join(parts) or "no served figure"


def _ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.3f}" if value is not None and base else "—"


def body(data: dict[str, Any], source: str) -> list[str]:
    lines: list[str] = []
    shm = data.get("shm") or {}
    versions = (data.get("setup") or {}).get("versions") or {}
    lines += [
        f"GPU: {(data.get('machine') or {}).get('gpu')}; /dev/shm write bandwidth (dd, 2 GiB, "
        f"fdatasync): {shm.get('gb_per_s')} GB/s; "
        + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())),
    ]
    for shape, rep in _shapes(data, source).items():
        prefill, offline = _tps(rep, "prefill"), _tps(rep, "offline")
        dims = rep.get("dims") or {}
        lines += [
            "",
            f"## {shape}",
            "",
            f"Llama, hidden {dims.get('hidden_size')}, {dims.get('num_layers')} layers, "
            f"vocabulary {dims.get('vocab_size')}; {rep.get('prompts')} prompts x "
            f"{rep.get('prompt_len')} tokens, layers {rep.get('layer_ids')}, "
            f"{rep.get('max_num_batched_tokens')} tokens per step; warm-up of "
            f"{rep.get('warmup_prompts')} prompts apart.",
            "",
            "| path | tokens/s | x prefill | x offline | start-up s |",
            "| --- | --- | --- | --- | --- |",
        ]
        for side, name in (
            ("prefill", "LLM.generate prefill"),
            ("offline", "vLLM offline extraction (LLM + connector)"),
        ):
            fig = rep.get(side) or {}
            tps = _tps(rep, side)
            lines.append(
                f"| {name} | {_rate(tps)} | {_ratio(tps, prefill)} | {_ratio(tps, offline)} "
                f"| {fig.get('startup_s', '—')} |"
            )
        served = rep.get("served") or {}
        clients = served.get("clients") or {}
        for client, fig in clients.items():
            tps = fig.get("tokens_per_s")
            tps = float(tps) if isinstance(tps, (int, float)) else None
            lines.append(
                f"| vllm serve + generate-offline-data, {client} speculators "
                f"{fig.get('speculators')} | {_rate(tps)} | {_ratio(tps, prefill)} "
                f"| {_ratio(tps, offline)} | {served.get('server_ready_s', '—')} |"
            )
        profile = rep.get("profile") or {}
        rows = []
        for client, fig in clients.items():
            main = (profile.get(f"{shape}-{client}-engine") or {}).get("main_thread")
            elapsed = fig.get("elapsed_s")
            if not main or not elapsed or not main.get("step_s"):
                continue
            tokens = fig.get("files", 0) * (rep.get("prompt_len") or 0)
            rows.append(
                f"| {client} | {elapsed} | {main['step_s']} | {main['step_s'] / elapsed:.0%} "
                f"| {_rate(tokens / main['step_s'])} |"
            )
        if rows:
            lines += [
                "",
                "Where the served path's time goes: the engine core's main thread (py-spy, "
                "idle included) during each client's measured pass.",
                "",
                "| client | pass s | engine in steps s | engine busy "
                "| engine's own rate tokens/s |",
                "| --- | --- | --- | --- | --- |",
                *rows,
            ]
        for side in SIDES:
            error = (rep.get(side) or {}).get("error")
            if error:
                lines += ["", f"{side} failed: `{str(error)[-300:]}`"]
    return lines
