"""Extraction speed vs vLLM's own prefill, measured in the environment that holds the wheels.

A standalone script for that environment's python (torch, vllm, speculators; not patchwheel):

    python speed.py SIDE REQUEST.json OUT.json

SIDE is ``speculators`` (VllmHiddenStatesGenerator.generate) or ``vllm`` (LLM.generate with
max_tokens=1, i.e. prefill plus one sampled token). The request names the model, the layers,
the prompts (or ``random_prompts``: count, length, vocabulary size, seed) and the engine
settings; both sides use the same dtype, step budget, sequences per step and no prefix caching.
``settings.enforce_eager`` picks eager mode for vLLM's side (the extraction always runs eager:
its capture hook replaces the model's forward). One untimed pass warms each side up, then the
best of ``repeats`` timed passes counts. OUT gets tokens, seconds, tokens/s and start-up time.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


def _speculators(request: dict[str, Any], prompts: list[list[int]]) -> dict[str, Any]:
    from speculators.data_generation.vllm_hidden_states_generator import (
        VllmHiddenStatesGenerator,
    )

    settings = request["settings"]
    started = time.perf_counter()
    generator = VllmHiddenStatesGenerator(
        request["model_dir"],
        layer_ids=request["layer_ids"],
        max_model_len=settings["max_model_len"],
        gpu_memory_utilization=settings["gpu_memory_utilization"],
        tensor_parallel_size=settings.get("tensor_parallel_size", 1),
        dtype=settings["dtype"],
        max_num_batched_tokens=settings["max_num_batched_tokens"],
    )
    startup = time.perf_counter() - started

    def extract(batch: list[list[int]]) -> None:
        results = generator.generate(batch)
        assert len(results) == len(batch)

    figures = best_rate(extract, prompts, request["repeats"])
    figures["startup_s"] = startup
    generator.executor.shutdown()
    return figures


def _vllm(request: dict[str, Any], prompts: list[list[int]]) -> dict[str, Any]:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    settings = request["settings"]
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
        enforce_eager=settings.get("enforce_eager", True),
    )
    startup = time.perf_counter() - started
    params = SamplingParams(max_tokens=1, temperature=0.0)

    def prefill(batch: list[list[int]]) -> None:
        llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in batch], params, use_tqdm=False)

    figures = best_rate(prefill, prompts, request["repeats"])
    figures["startup_s"] = startup
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
