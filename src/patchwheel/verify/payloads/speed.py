"""Extraction speed vs vLLM's own prefill, measured in the environment that holds the wheels.

A standalone script for that environment's python (torch, vllm, speculators; not patchwheel):

    python speed.py SIDE REQUEST.json OUT.json

SIDE is ``speculators`` (VllmHiddenStatesGenerator.generate) or ``vllm`` (LLM.generate with
max_tokens=1, i.e. prefill plus one sampled token). The request names the model, the layers,
the prompts (or ``random_prompts``: count, length, vocabulary size, seed) and this side's
engine settings; both sides use the same dtype, step budget, sequences per step and no prefix
caching. ``settings.enforce_eager`` is passed to whichever side runs: vLLM's ``LLM`` and
speculators' generator (which compiles the model and captures CUDA graphs on a GPU unless told
``enforce_eager=True``); a generator without that parameter is recorded under ``unsupported``,
never silently run another way.

Start-up is measured the same way on both sides: from the moment the parent launched this
process (``PATCHWHEEL_LAUNCHED_AT``, a ``time.time()``; else this script's first line) to the
first result, i.e. the first prompt's generate call returned: interpreter and vLLM import,
engine and workers, weights, compilation, CUDA graphs and that first call. Then one untimed
pass warms every batch shape up, and the best of ``repeats`` timed passes counts.

OUT gets tokens, seconds, tokens/s, start-up and its phases, the engine's effective settings
(``oracle.engine_settings``) and each worker's runner and attention backend, and with
``"profile": true`` in the request, a cProfile summary of one more pass in this (the driver)
process: the time under the step's host work, the workers' RPC waits, the capture's record
calls, copies, synchronisation and the scheduler. With ``"user_job": {"dirs": {label: folder}}``
the speculators side then also times the user's job with the same generator (``savejob.py``:
batches of 8 in memory, and the training files written the offline script's way to each
folder), under ``user_job``.
"""

from __future__ import annotations

import cProfile
import importlib
import inspect
import json
import os
import pstats
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STARTED_AT = time.time()
LAUNCH_ENV = "PATCHWHEEL_LAUNCHED_AT"
# Function-name patterns of the driver's time, by what it is spent on (cumulative seconds of
# the outermost matching function; a category's functions do not call one another).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "step_host": ("execute_model", "_execute_and_capture", "step"),
    "rpc_wait": ("collective_rpc", "get_response", "dequeue", "wait_for_reply"),
    "record": ("_record_step", "record", "_drain", "_collect"),
    "copies": ("copy_", "to", "cpu", "pin_memory", "numpy", "tolist"),
    "synchronisation": ("synchronize", "wait", "query"),
    "scheduler": ("schedule", "update_from_output"),
}


def prompts_of(request: dict[str, Any]) -> list[list[int]]:
    """The request's prompts: given, or drawn from a seeded generator (same on every side)."""
    if "prompts" in request:
        return [list(p) for p in request["prompts"]]
    spec = request["random_prompts"]
    rng = random.Random(spec["seed"])
    low = spec.get("low", 3)  # skip special tokens
    return [
        [rng.randrange(low, spec["vocab_size"]) for _ in range(spec["length"])]
        for _ in range(spec["count"])
    ]


def launched_at() -> float:
    """When the parent launched this process (else when this script started)."""
    try:
        return float(os.environ[LAUNCH_ENV])
    except (KeyError, ValueError):
        return STARTED_AT


def best_rate(
    run: Callable[[list[list[int]]], object], prompts: list[list[int]], repeats: int
) -> dict[str, Any]:
    """Warm up once, then time ``repeats`` passes; the fastest counts."""
    tokens = sum(len(p) for p in prompts)
    run(prompts)
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        run(prompts)
        seconds.append(time.perf_counter() - started)
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / min(seconds)}


def profile_pass(run: Callable[[list[list[int]]], object], prompts: list[list[int]]) -> Any:
    """One more pass under cProfile: its wall time, the categories and the top functions."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    run(prompts)
    profiler.disable()
    wall = time.perf_counter() - started
    stats: Any = pstats.Stats(profiler)
    rows = []
    for (_file, _line, name), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():
        rows.append((name, int(calls), float(tottime), float(cumtime)))
    categories = {}
    for category, names in CATEGORIES.items():
        matching = [r for r in rows if _plain_name(r[0]) in names]
        categories[category] = round(max((r[3] for r in matching), default=0.0), 4)
    top = sorted(rows, key=lambda r: -r[2])[:15]
    return {
        "pass_s": round(wall, 4),
        "categories_s": categories,
        "top_self_time": [
            {"function": n, "calls": c, "self_s": round(t, 4), "cumulative_s": round(cu, 4)}
            for n, c, t, cu in top
        ],
    }


def _plain_name(name: str) -> str:
    """``<method 'copy_' of 'torch._C.TensorBase' objects>`` -> ``copy_``,
    ``<built-in method torch.cuda.synchronize>`` -> ``synchronize`` (cProfile's C names)."""
    for prefix in ("<method '", "<built-in method "):
        if name.startswith(prefix):
            rest = name[len(prefix) :]
            name = rest.split("'" if prefix == "<method '" else " ", 1)[0].rstrip(">")
    return name.rsplit(".", 1)[-1]


def _sibling(name: str) -> Any:
    """A sibling module (``oracle``, ``savejob``): this script's folder goes last on sys.path,
    and on the workers' (through PYTHONPATH), shadowing nothing."""
    here = str(Path(__file__).resolve().parent)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if here not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([*parts, here])
    if here not in sys.path:
        sys.path.append(here)
    return importlib.import_module(name)


def _oracle() -> Any:
    return _sibling("oracle")


def _facts(oracle: Any, vllm_config: Any, rpc: Callable[..., Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {"effective_settings": oracle.engine_settings(vllm_config)}
    try:
        facts["workers"] = list(rpc(oracle.worker_facts))
    except Exception as exc:  # recorded; the settings above still stand
        facts["workers_error"] = f"{type(exc).__name__}: {exc}"
    return facts


def _speculators(request: dict[str, Any], prompts: list[list[int]]) -> dict[str, Any]:
    oracle = _oracle()
    imported = time.perf_counter()
    from speculators.data_generation.vllm_hidden_states_generator import (
        VllmHiddenStatesGenerator,
    )

    import_s = time.perf_counter() - imported
    settings = request["settings"]
    wanted = {
        "max_model_len": settings["max_model_len"],
        "gpu_memory_utilization": settings["gpu_memory_utilization"],
        "tensor_parallel_size": settings.get("tensor_parallel_size", 1),
        "dtype": settings["dtype"],
        "max_num_batched_tokens": settings["max_num_batched_tokens"],
    }
    if "enforce_eager" in settings:
        wanted["enforce_eager"] = settings["enforce_eager"]
    accepted = inspect.signature(VllmHiddenStatesGenerator).parameters
    kwargs = {k: v for k, v in wanted.items() if k in accepted}
    started = time.perf_counter()
    generator = VllmHiddenStatesGenerator(
        request["model_dir"], layer_ids=request["layer_ids"], **kwargs
    )
    init_s = time.perf_counter() - started

    def extract(batch: list[list[int]]) -> None:
        results = generator.generate(batch)
        assert len(results) == len(batch)

    extract(prompts[:1])
    startup = time.time() - launched_at()
    config = getattr(generator, "vllm_config", None) or generator.executor.vllm_config
    figures = best_rate(extract, prompts, request["repeats"])
    figures.update(_facts(oracle, config, generator.executor.collective_rpc))
    figures["startup_s"] = startup
    figures["startup_phases_s"] = {"import": import_s, "engine": init_s}
    figures["unsupported"] = sorted(set(wanted) - set(kwargs))
    if request.get("profile"):
        figures["profile"] = profile_pass(extract, prompts)
    if request.get("user_job"):
        figures["user_job"] = _user_job(generator, request, prompts)
    generator.executor.shutdown()
    return figures


def _user_job(generator: Any, request: dict[str, Any], prompts: list[list[int]]) -> Any:
    """Tokens -> training files, as speculators' offline script writes them (``savejob``)."""
    import torch

    savejob = _sibling("savejob")
    config = generator.vllm_config.model_config
    itemsize = torch.empty((), dtype=config.dtype).element_size()
    per_token = len(request["layer_ids"]) * config.get_hidden_size() * itemsize
    job = request["user_job"]
    figures = savejob.measure(generator.generate, prompts, job, request["repeats"], per_token)
    if request.get("profile") and job.get("dirs"):
        label, folder = next(iter(job["dirs"].items()))
        figures["profile"] = {
            "dir": label,
            **profile_pass(
                lambda batch: savejob.save_files(
                    generator.generate,
                    batch,
                    Path(folder),
                    job.get("batch_size", 8),
                    job.get("threads", 4),
                ),
                prompts,
            ),
        }
        savejob.remove(Path(folder))
    return figures


def _vllm(request: dict[str, Any], prompts: list[list[int]]) -> dict[str, Any]:
    oracle = _oracle()
    imported = time.perf_counter()
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    import_s = time.perf_counter() - imported
    settings = request["settings"]
    # LLM.collective_rpc sends the facts function to the engine process by pickle: allowed
    # for that call's sake only (prompts and outputs travel as before).
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    started = time.perf_counter()
    llm = LLM(
        model=request["model_dir"],
        dtype=settings["dtype"],
        max_model_len=settings["max_model_len"],
        max_num_batched_tokens=settings["max_num_batched_tokens"],
        max_num_seqs=settings["max_num_seqs"],
        gpu_memory_utilization=settings["gpu_memory_utilization"],
        tensor_parallel_size=settings.get("tensor_parallel_size", 1),
        enable_prefix_caching=False,
        enforce_eager=settings.get("enforce_eager", False),
    )
    init_s = time.perf_counter() - started
    params = SamplingParams(max_tokens=1, temperature=0.0)

    def prefill(batch: list[list[int]]) -> None:
        llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in batch], params, use_tqdm=False)

    prefill(prompts[:1])
    startup = time.time() - launched_at()
    figures = best_rate(prefill, prompts, request["repeats"])
    figures.update(_facts(oracle, llm.llm_engine.vllm_config, llm.collective_rpc))
    figures["startup_s"] = startup
    figures["startup_phases_s"] = {"import": import_s, "engine": init_s}
    figures["unsupported"] = []
    if request.get("profile"):
        figures["profile"] = profile_pass(prefill, prompts)
    return figures


def main(argv: list[str] | None = None) -> int:
    """``python speed.py SIDE REQUEST OUT``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] not in ("speculators", "vllm"):
        print(__doc__, file=sys.stderr)
        return 2
    side, request_path, out_path = args[0], Path(args[1]), Path(args[2])
    request = json.loads(request_path.read_text(encoding="utf-8"))
    prompts = prompts_of(request)
    figures = (_speculators if side == "speculators" else _vllm)(request, prompts)
    figures["side"] = side
    out_path.write_text(json.dumps(figures), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
