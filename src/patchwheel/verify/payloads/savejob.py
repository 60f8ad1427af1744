"""The user's job, end to end: tokens -> training files on disk, as speculators' own data
generation writes them. A sibling module of ``speed.py`` for the wheels' python (torch and
the standard library; imported there through its folder on ``sys.path``).

speculators v0.3.0's ``scripts/data_generation_offline.py`` (not shipped in its sdist, so not
run here) hands the generator ``--batch-size`` prompts per ``generate`` call (default 8) and
submits each result to a pool of ``MAX_IO_WORKERS`` = 4 threads, each of which
``torch.save``s one sample as ``data_<i>.pt``: ``input_ids``, ``hidden_states`` (one tensor
per layer, ``.contiguous()``) and ``loss_mask``, while the main thread generates the next
batch; at the end it waits for every save. ``save_files`` does exactly that with this
module's own code, so the figure is the script's way of writing, timed without its dataset
preprocessing. A pass's time ends when every ``torch.save`` has returned (what the script
waits for); ``durable_s`` adds an ``os.sync()`` after it (the data on the disk, not just in
the page cache).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

OFFLINE_BATCH_SIZE = 8  # data_generation_offline.py --batch-size default
OFFLINE_IO_THREADS = 4  # its MAX_IO_WORKERS

Generate = Callable[[list[list[int]]], list[dict[str, Any]]]


def sample_of(result: dict[str, Any]) -> dict[str, Any]:
    """The dict the offline script saves for one generator result."""
    import torch

    n = len(result["input_ids"])
    return {
        "input_ids": result["input_ids"],
        "hidden_states": [h.contiguous() for h in result["hidden_states"]],
        "loss_mask": torch.ones(n, dtype=torch.long),
    }


def in_memory(
    generate: Generate, prompts: Sequence[list[int]], batch_size: int
) -> tuple[float, float]:
    """One pass of ``batch_size``-prompt calls, results dropped: (seconds, seconds in calls)."""
    started = time.perf_counter()
    in_calls = 0.0
    for first in range(0, len(prompts), batch_size):
        call = time.perf_counter()
        results = generate(list(prompts[first : first + batch_size]))
        in_calls += time.perf_counter() - call
        del results
    return time.perf_counter() - started, in_calls


def save_files(
    generate: Generate,
    prompts: Sequence[list[int]],
    out_dir: Path,
    batch_size: int = OFFLINE_BATCH_SIZE,
    threads: int = OFFLINE_IO_THREADS,
) -> dict[str, Any]:
    """One pass written the offline script's way; its times, files and bytes."""
    import torch

    _empty(out_dir)
    started = time.perf_counter()
    in_calls = 0.0
    futures: list[Future[Any]] = []
    most_pending = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        index = 0
        for first in range(0, len(prompts), batch_size):
            call = time.perf_counter()
            results = generate(list(prompts[first : first + batch_size]))
            in_calls += time.perf_counter() - call
            for result in results:
                path = out_dir / f"data_{index}.pt"
                futures.append(pool.submit(torch.save, sample_of(result), path))
                index += 1
            most_pending = max(most_pending, sum(not f.done() for f in futures))
            del results
        generated = time.perf_counter()
        for future in futures:
            future.result()
    saved = time.perf_counter()
    os.sync()
    durable = time.perf_counter()
    sizes = [p.stat().st_size for p in out_dir.glob("data_*.pt")]
    return {
        "seconds": saved - started,
        "durable_s": durable - started,
        "in_generate_s": in_calls,
        "generate_loop_s": generated - started,
        "drain_s": saved - generated,
        "most_pending_saves": most_pending,
        "files": len(sizes),
        "bytes": sum(sizes),
        "largest_file": max(sizes, default=0),
    }


def save_only(
    generate: Generate,
    prompts: Sequence[list[int]],
    out_dir: Path,
    batch_size: int = OFFLINE_BATCH_SIZE,
    threads: int = OFFLINE_IO_THREADS,
) -> dict[str, Any]:
    """The saving alone: each call's results saved the script's way, timed, and finished
    before the next call (so generation never overlaps it): bytes per second of torch.save
    on the generator's own result tensors."""
    import torch

    _empty(out_dir)
    saving = 0.0
    index = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for first in range(0, len(prompts), batch_size):
            results = generate(list(prompts[first : first + batch_size]))
            started = time.perf_counter()
            futures = []
            for result in results:
                path = out_dir / f"data_{index}.pt"
                futures.append(pool.submit(torch.save, sample_of(result), path))
                index += 1
            for future in futures:
                future.result()
            saving += time.perf_counter() - started
            del results, futures
    nbytes = sum(p.stat().st_size for p in out_dir.glob("data_*.pt"))
    remove(out_dir)
    return {"seconds": saving, "bytes": nbytes, "bytes_per_s": nbytes / saving}


def measure(
    generate: Generate,
    prompts: Sequence[list[int]],
    request: dict[str, Any],
    repeats: int,
    hidden_bytes_per_token: int,
) -> dict[str, Any]:
    """The user job's figures: batched in memory and written to each of ``request["dirs"]``.

    ``request``: ``batch_size``, ``threads``, ``dirs`` ({label: folder}); each label's best
    pass (by the script's time) counts; the folders are emptied after their passes.
    """
    batch = int(request.get("batch_size", OFFLINE_BATCH_SIZE))
    threads = int(request.get("threads", OFFLINE_IO_THREADS))
    tokens = sum(len(p) for p in prompts)
    out: dict[str, Any] = {
        "batch_size": batch,
        "threads": threads,
        "tokens": tokens,
        "hidden_bytes": tokens * hidden_bytes_per_token,
    }
    in_memory(generate, prompts, batch)  # warm the batch shapes up
    passes = [in_memory(generate, prompts, batch) for _ in range(repeats)]
    best = min(passes)
    out["in_memory_batched"] = {
        "seconds": [round(p[0], 4) for p in passes],
        "in_generate_s": round(best[1], 4),
        "tokens_per_s": tokens / best[0],
    }
    files: dict[str, Any] = {}
    for label, folder in request.get("dirs", {}).items():
        out_dir = Path(folder)
        runs = [save_files(generate, prompts, out_dir, batch, threads) for _ in range(repeats)]
        chosen = min(runs, key=lambda r: r["seconds"])
        files[label] = {
            **chosen,
            "path": str(out_dir),
            "all_seconds": [round(r["seconds"], 4) for r in runs],
            "tokens_per_s": tokens / chosen["seconds"],
            "durable_tokens_per_s": tokens / chosen["durable_s"],
            "bytes_per_s": chosen["bytes"] / chosen["seconds"],
            # The files hold exactly the hidden states (and small ids and masks): a
            # sample saved as a view of a larger storage would show here as >> 1.
            "bytes_vs_hidden_states": chosen["bytes"] / max(1, tokens * hidden_bytes_per_token),
        }
        saving = [save_only(generate, prompts, out_dir, batch, threads) for _ in range(repeats)]
        files[label]["save_only"] = max(saving, key=lambda r: r["bytes_per_s"])
        remove(out_dir)
    out["files"] = files
    return out


def _empty(out_dir: Path) -> None:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)


def remove(out_dir: Path) -> None:
    """Remove a pass's folder (the files of a 4 GB pass should not outlive it)."""
    shutil.rmtree(out_dir, ignore_errors=True)
