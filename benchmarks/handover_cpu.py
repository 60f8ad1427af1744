"""The generator's hand-over and the saving, without the model: bytes per second that
speculators' offline script's saving (``torch.save`` on 4 threads, ``verify/payloads/savejob.py``)
gets from the generator's own result tensors, for the built speculators and, with
``--baseline-speculators WHEEL``, another build of it ("before").

    python -P benchmarks/handover_cpu.py [--baseline-speculators WHEEL] [--calls 24] [--rounds 3]

In the verify venv (made by ``benchmarks/extract_cpu.py`` or ``nox -s verify``), each side
runs a child that imports that build's ``_HostBuffers`` (the shared-memory segments behind
``VllmHiddenStatesGenerator.generate``'s results) and, per call of 8 samples of 1024 tokens x
4 layers x 2048 x bfloat16 (134 MB, the GPU benchmark's shape): takes a segment, writes it
through a second mapping as the worker does, builds the results exactly as ``generate`` does
(``torch.frombuffer`` per request, one tensor per layer), saves them to the RAM disk the
script's way and waits, then drops them. The sides alternate for ``--rounds``; each side's
best round counts. The figures isolate what the generator's hand-over costs the saving; the
model's compute (which dominates extraction on a CPU) is left out. Page faults (the process's
minor faults while saving, from getrusage) do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r"""
import inspect, json, os, resource, sys, time
from concurrent.futures import ThreadPoolExecutor
import torch
sys.path.append(sys.argv[3])
import savejob
from speculators.data_generation import vllm_hidden_states_generator as gen

calls, out_dir = int(sys.argv[1]), sys.argv[2]
L, T, H, B = 4, 1024, 2048, 8
dtype = torch.bfloat16
host = gen._HostBuffers()
takes_nbytes = len(inspect.signature(host.view).parameters) == 2
source = torch.randn(L, T, H).to(dtype)
worker = {}  # the worker's own mappings, by key (as custom_worker keeps them)
os.makedirs(out_dir, exist_ok=True)
saving = handing = releasing = 0.0
nbytes_saved = faults = 0
threads = int(sys.argv[4])
index = 0
with ThreadPoolExecutor(max_workers=threads) as pool:
    for call in range(calls + 2):  # two warm-up calls
        offsets, nbytes = host.layout([T] * B, L, H, 2)
        key, path = host.take(nbytes)
        if path is not None:
            worker[key] = torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8)
        flat = worker[key]
        for off in offsets:
            flat[off : off + L * T * H * 2].view(dtype).view(L, T, H).copy_(source)
        host.mapped_by_worker(key)
        started = time.perf_counter()
        mapping = host.view(key, nbytes) if takes_nbytes else host.view(key)
        results = []
        for off in offsets:
            states = torch.frombuffer(mapping, dtype=dtype, count=L * T * H, offset=off)
            results.append({"input_ids": torch.arange(T), "hidden_states":
                            list(states.view(L, T, H).unbind(0)), "loss_mask": None})
        del mapping
        handed = time.perf_counter()
        minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        futures = []
        for r in results:
            name = f"{out_dir}/data_{index % 64}.pt"
            futures.append(pool.submit(torch.save, savejob.sample_of(r), name))
            index += 1
        for f in futures:
            f.result()
        done = time.perf_counter()
        minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt
        del futures, r
        released = time.perf_counter()
        del results  # the call's last tensors: the segment goes back to the pool
        released = time.perf_counter() - released
        for k in host.take_dropped():
            worker.pop(k, None)
        if call >= 2:
            handing += handed - started
            saving += done - handed
            faults += minflt
            releasing += released
            nbytes_saved += B * L * T * H * 2
print(json.dumps({
    "save_bytes_per_s": nbytes_saved / saving, "handover_s_per_call": handing / calls,
    "faults_per_call": faults / calls, "release_s_per_call": releasing / calls,
    "segments": len(host._fds), "file_bytes": os.path.getsize(f"{out_dir}/data_0.pt"),
}))
"""


def _side(
    python: Path, site: Path | None, calls: int, verify_dir: Path, threads: int
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="handover-") as out:
        proc = subprocess.run(
            [str(python), "-c", CHILD, str(calls), out, str(verify_dir), str(threads)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if proc.returncode != 0:
        raise SystemExit(f"side failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--target", default="vllm-0.32")
    parser.add_argument("--baseline-speculators", type=Path)
    parser.add_argument("--calls", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4, help="saving threads (the script: 4)")
    args = parser.parse_args()
    work = args.root / "build" / ".work" / args.target / "verify-cpu"
    python = work / "venv" / "bin" / "python"
    if not python.is_file():
        raise SystemExit(f"{python}: no verify venv (run benchmarks/extract_cpu.py first)")
    verify_dir = args.root / "src" / "patchwheel" / "verify"
    sides: dict[str, Path | None] = {"built": None}
    if args.baseline_speculators is not None:
        site = work / "handover-baseline-site"
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target",
             str(site), str(args.baseline_speculators)],
            check=True,
        )  # fmt: skip
        sides = {"before": site, **sides}
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, site in sides.items():
            runs[name].append(_side(python, site, args.calls, verify_dir, args.threads))
    for name, results in runs.items():
        best = max(results, key=lambda r: r["save_bytes_per_s"])
        rates = ", ".join(f"{r['save_bytes_per_s'] / 1e9:.2f}" for r in results)
        print(
            f"{name:7s} saving {best['save_bytes_per_s'] / 1e9:.2f} GB/s (rounds: {rates}); "
            f"hand-over {best['handover_s_per_call'] * 1e3:.2f} ms a call; page faults while "
            f"saving {best['faults_per_call']:,.0f} a call; releasing a call's results "
            f"{best['release_s_per_call'] * 1e3:.2f} ms; "
            f"file {best['file_bytes']} bytes; segments kept {best['segments']}"
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
