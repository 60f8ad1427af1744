"""Today's speculators generation at the engine's speed? Four paths side by side on one GPU.

On the same model shape and the same random token prompts, in one call (or several calls
accumulating one report):

- ``prefill``: vLLM's ``LLM.generate`` with ``max_tokens=1`` (the engine's own speed);
- ``offline``: vLLM's offline extraction: ``LLM`` with the ``extract_hidden_states``
  speculative method and ``ExampleHiddenStatesConnector`` writing each request's file;
- ``served``: ``vllm serve`` with the same two configs and speculators' own
  ``generate-offline-data`` client with its defaults, once with the index's speculators 0.9.0
  (``upstream``: the unpatched client in front of the same install) and once with the target's
  wheel (``target``), against one server.

Each side: its start-up (launch to ready), one warm-up pass of ``--warmup`` prompts reported
apart, then the measured pass of all ``--prompts`` (steady state); tokens per second. The
files go to /dev/shm, whose write bandwidth (dd) is recorded beside them. With ``--profile``
the served side samples the API server, the engine core and the client with py-spy during
the measured pass of each client and while the server starts, and keeps the engine's own
10-s throughput windows (prompt tokens/s, running, waiting) from the server's log.

Runs on the GPU machine with its own python (its CUDA torch), from the checkout root:

    python3 benchmarks/served_gpu.py setup --wheelhouse WH --work W \
        --upstream-speculators speculators-0.9.0-py3-none-any.whl [--py-spy py_spy-….whl]
    python3 benchmarks/served_gpu.py run --work W --shape bench --sides prefill,offline,served \
        --report W/served-paths.json --profile
    python3 benchmarks/served_gpu.py render W/served-paths.json   # the table, from the JSON

Module level imports only the standard library: this file runs before anything is installed.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

SHM = Path("/dev/shm")
SRC = Path(__file__).resolve().parents[1] / "src"

# Model shapes (Llama). "bench": the GPU session's throughput model; "8b": Llama-3-8B's shape.
SHAPES: dict[str, dict[str, int]] = {
    "bench": {
        "num_layers": 16,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_heads": 16,
        "num_kv_heads": 8,
        "vocab_size": 32000,
    },
    "8b": {
        "num_layers": 32,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_heads": 32,
        "num_kv_heads": 8,
        "vocab_size": 128256,
    },
    # A smoke test of this script on a CPU build of vLLM, not a measurement.
    "tiny": {
        "num_layers": 4,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_heads": 4,
        "num_kv_heads": 2,
        "vocab_size": 1024,
    },
}
MAX_BATCHED_TOKENS = 16384
GPU_MEMORY_UTILIZATION = 0.8
HARNESS_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
    "COLUMNS": "400",  # rich (speculators' log) wraps at 80 columns off a terminal
}
_TIMING = re.compile(r"Timing: ([0-9.]+)s elapsed, ([0-9.]+) samples/s")
_WINDOW = re.compile(
    r"(\d\d:\d\d:\d\d) \[[^\]]*\] Engine \d+: Avg prompt throughput: ([0-9.]+) tokens/s.*?"
    r"Running: (\d+) reqs, Waiting: (\d+) reqs"
)

# --------------------------------------------------------------------------- the payload
# Run by the install's python (vllm, torch): one LLM side, its figures as JSON on stdout's
# last line. argv: REQUEST.json
PAYLOAD = r'''
import fcntl, json, os, sys, time
T0 = float(os.environ.get("BENCH_LAUNCHED_AT", time.time()))

def main():
    req = json.load(open(sys.argv[1]))
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    kwargs = dict(model=req["model"], load_format="dummy", dtype="bfloat16",
                  max_model_len=req["max_model_len"], max_num_batched_tokens=req["max_batched"],
                  gpu_memory_utilization=req["gpu_util"], seed=0)
    store = req.get("store")
    if store:
        layers = {"eagle_aux_hidden_state_layer_ids": req["layer_ids"]}
        kwargs["speculative_config"] = {"method": "extract_hidden_states",
            "num_speculative_tokens": 1, "draft_model_config": {"hf_config": layers}}
        kwargs["kv_transfer_config"] = {"kv_connector": "ExampleHiddenStatesConnector",
            "kv_role": "kv_producer", "kv_connector_extra_config": {"shared_storage_path": store}}
    llm = LLM(**kwargs)
    params = SamplingParams(max_tokens=1, temperature=0.0)
    prompts = [TokensPrompt(prompt_token_ids=ids) for ids in json.load(open(req["prompts"]))]

    def written(n, deadline):
        """Every file of the pass written: n files, each lock free (the writer closed it)."""
        while time.time() < deadline:
            names = [x for x in os.listdir(store) if x.endswith(".safetensors")]
            if len(names) >= n:
                for name in names:
                    lock = os.path.join(store, name + ".lock")
                    if os.path.exists(lock):
                        with open(lock) as handle:
                            fcntl.flock(handle, fcntl.LOCK_SH)
                return len(names)
            time.sleep(0.005)
        raise SystemExit(f"only {len(names)} of {n} files after the deadline")

    def clear():
        for name in os.listdir(store):
            os.remove(os.path.join(store, name))

    def one_pass(batch):
        if store:
            clear()
        start = time.perf_counter()
        out = llm.generate(batch, params, use_tqdm=False)
        files = written(len(batch), time.time() + 600) if store else None
        return time.perf_counter() - start, len(out), files

    llm.generate(prompts[:1], params, use_tqdm=False)
    startup = time.time() - T0
    warm_s, _, _ = one_pass(prompts[: req["warmup"]])
    seconds, n, files = one_pass(prompts)
    tokens = sum(len(p["prompt_token_ids"]) for p in prompts)
    if store:
        clear()
    print("BENCH_RESULT " + json.dumps({"startup_s": round(startup, 2),
                      "warmup_s": round(warm_s, 3),
                      "warmup_prompts": req["warmup"], "seconds": round(seconds, 3),
                      "prompts": n, "tokens": tokens, "files": files,
                      "tokens_per_s": round(tokens / seconds, 1)}), flush=True)

if __name__ == "__main__":  # vLLM's engine core starts by spawn
    main()
'''


# --------------------------------------------------------------------------- helpers
def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def _run(argv: list[str], log: Path, env: dict[str, str], timeout: float) -> str:
    with log.open("ab") as handle:
        proc = subprocess.run(
            argv, stdout=handle, stderr=subprocess.STDOUT, env=env, timeout=timeout, check=False
        )
    text = log.read_text(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}); {log}:\n{text[-3000:]}")
    return text


def _setup_of(work: Path) -> dict[str, Any]:
    path = work / "setup.json"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run `setup` first")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _env(setup: dict[str, Any], *front: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HARNESS_ENV)
    env["PYTHONPATH"] = os.pathsep.join([*front, setup["site"]])
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Every descendant of pid (from /proc)."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents[ppid].append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _dd(directory: Path) -> dict[str, Any]:
    target = directory / "dd.bin"
    start = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=16M", "count=128", "conv=fdatasync"],
        capture_output=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    target.unlink()
    return {
        "path": str(directory),
        "bytes": 16 * 2**20 * 128,
        "gb_per_s": round(2.147483648 / seconds, 2),
    }


# --------------------------------------------------------------------------- setup
def setup(args: argparse.Namespace) -> int:
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    log = work / "install.log"
    wheelhouse: Path = args.wheelhouse
    start = time.perf_counter()
    _say(f"installing {wheelhouse} into {site} (INSTALL.txt's way beside the machine's torch)")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-compile",
            "--disable-pip-version-check",
            "--no-index",
            "--no-deps",
            "--find-links",
            str(wheelhouse),
            "-r",
            str(wheelhouse / "requirements.txt"),
            "--target",
            str(site),
            "--upgrade",
        ],
        log,
        dict(os.environ),
        900,
    )
    upstream = work / "upstream-site"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-compile",
            "--disable-pip-version-check",
            "--no-index",
            "--no-deps",
            "--target",
            str(upstream),
            "--upgrade",
            str(args.upstream_speculators),
        ],
        log,
        dict(os.environ),
        300,
    )
    spy = None
    if args.py_spy is not None:
        tools = work / "tools"
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-index",
                "--no-deps",
                "--target",
                str(tools),
                "--upgrade",
                str(args.py_spy),
            ],
            log,
            dict(os.environ),
            300,
        )
        found = list(tools.rglob("py-spy"))
        spy = str(found[0]) if found else None
    versions: dict[str, str | None] = {}
    for dist in ("vllm", "speculators", "hs_connectors", "openai", "httpx2"):
        hits = sorted(site.glob(f"{dist}-*.dist-info"))
        versions[dist] = hits[0].name[len(dist) + 1 : -len(".dist-info")] if hits else None
    versions["torch"] = (
        subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or None
    )
    upstream_hits = sorted(upstream.glob("speculators-*.dist-info"))
    data = {
        "site": str(site),
        "upstream_site": str(upstream),
        "py_spy": spy,
        "python": sys.executable,
        "versions": versions,
        "upstream_speculators": upstream_hits[0].name[len("speculators-") : -len(".dist-info")]
        if upstream_hits
        else None,
        "install_s": round(time.perf_counter() - start, 1),
    }
    (work / "setup.json").write_text(json.dumps(data, indent=2) + "\n")
    _say(f"installed in {data['install_s']} s: {versions}")
    return 0


# --------------------------------------------------------------------------- model, prompts
def _model(setup_: dict[str, Any], work: Path, shape: str) -> Path:
    """config.json of the shape (weights: vLLM's dummy loader) and a WordLevel tokenizer of its
    vocabulary (patchwheel.verify.models.tiny), made by the install's python."""
    model = work / f"model-{shape}"
    if (model / "config.json").is_file():
        return model
    dims = SHAPES[shape]
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from patchwheel.verify.models.tiny import (\n"
        "    TinyLlamaSpec, make_tokenizer_dir, vocab, BOS, EOS)\n"
        "d = json.loads(sys.argv[2]); out = Path(sys.argv[1]); out.mkdir(parents=True)\n"
        "spec = TinyLlamaSpec(num_layers=d['num_layers'], hidden_size=d['hidden_size'],\n"
        "    intermediate_size=d['intermediate_size'], num_heads=d['num_heads'],\n"
        "    num_kv_heads=d['num_kv_heads'], vocab_size=d['vocab_size'])\n"
        "make_tokenizer_dir(spec, out)\n"
        "t = vocab(spec)\n"
        "cfg = {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama',\n"
        "    'vocab_size': spec.vocab_size, 'hidden_size': spec.hidden_size,\n"
        "    'intermediate_size': spec.intermediate_size, 'num_hidden_layers': spec.num_layers,\n"
        "    'num_attention_heads': spec.num_heads, 'num_key_value_heads': spec.num_kv_heads,\n"
        "    'head_dim': spec.head_dim, 'max_position_embeddings': 8192, 'rms_norm_eps': 1e-5,\n"
        "    'rope_theta': 500000.0, 'tie_word_embeddings': False, 'hidden_act': 'silu',\n"
        "    'bos_token_id': t[BOS], 'eos_token_id': t[EOS], 'torch_dtype': 'bfloat16'}\n"
        "(out / 'config.json').write_text(json.dumps(cfg, indent=2))\n"
    )
    env = _env(setup_, str(SRC))
    _run([setup_["python"], "-c", code, str(model), json.dumps(dims)], work / "model.log", env, 600)
    return model


def _layer_ids(shape: str) -> list[int]:
    """The GPU session's served layers (vLLM ids 3, L/2+1, L-2; the launcher appends L)."""
    layers = SHAPES[shape]["num_layers"]
    return sorted({3, layers // 2 + 1, layers - 2, layers})


def _prompts(work: Path, shape: str, count: int, length: int) -> tuple[Path, Path]:
    """Random token prompts (seed 7) as a JSON list and as speculators' tokens.jsonl."""
    vocab = SHAPES[shape]["vocab_size"]
    rng = random.Random(7)
    ids = [[rng.randrange(3, vocab) for _ in range(length)] for _ in range(count)]
    as_json = work / f"prompts-{shape}-{count}x{length}.json"
    as_json.write_text(json.dumps(ids))
    jsonl = work / f"tokens-{shape}-{count}x{length}.jsonl"
    with jsonl.open("w") as handle:
        for row in ids:
            handle.write(json.dumps({"input_ids": row, "loss_mask": [1] * len(row)}) + "\n")
    return as_json, jsonl


# --------------------------------------------------------------------------- sides
def _llm_side(
    setup_: dict[str, Any],
    work: Path,
    shape: str,
    model: Path,
    prompts: Path,
    args: argparse.Namespace,
    side: str,
) -> dict[str, Any]:
    store = None
    if side == "offline":
        store = SHM / "pw-bench" / f"offline-{shape}"
        shutil.rmtree(store, ignore_errors=True)
        store.mkdir(parents=True)
    request = {
        "model": str(model),
        "prompts": str(prompts),
        "max_model_len": args.prompt_len + 8,
        "max_batched": MAX_BATCHED_TOKENS,
        "gpu_util": GPU_MEMORY_UTILIZATION,
        "warmup": args.warmup,
        "layer_ids": _layer_ids(shape),
        "store": str(store) if store else None,
    }
    req_path = work / f"request-{side}-{shape}.json"
    req_path.write_text(json.dumps(request))
    payload = work / "payload.py"
    payload.write_text(PAYLOAD)
    caches = work / f"caches-{side}-{shape}"
    shutil.rmtree(caches, ignore_errors=True)
    env = _env(setup_)
    env.update(
        {
            "VLLM_CACHE_ROOT": str(caches / "vllm"),
            "TRITON_CACHE_DIR": str(caches / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            "BENCH_LAUNCHED_AT": repr(time.time()),
        }
    )
    log = work / f"{side}-{shape}.log"
    log.unlink(missing_ok=True)
    _say(f"{side} ({shape}): LLM side starting")
    text = _run([setup_["python"], str(payload), str(req_path)], log, env, args.side_timeout)
    found = [line for line in text.splitlines() if line.startswith("BENCH_RESULT ")]
    if not found:
        raise SystemExit(f"{side}: no result line in {log}:\n{text[-3000:]}")
    figures: dict[str, Any] = json.loads(found[-1].split(" ", 1)[1])
    if store is not None:
        shutil.rmtree(store, ignore_errors=True)
    _say(
        f"{side} ({shape}): {figures['tokens_per_s']:,.0f} tokens/s, "
        f"start-up {figures['startup_s']} s"
    )
    return figures


class _Sampler:
    """py-spy dumps of the server's python processes every few seconds (while it starts)."""

    def __init__(self, spy: str | None, root: int, out: Path) -> None:
        self.spy, self.root, self.out, self.stop_at = spy, root, out, 0.0

    def dump_once(self) -> None:
        if self.spy is None:
            return
        with self.out.open("a") as handle:
            handle.write(f"\n===== {time.strftime('%H:%M:%S')}\n")
            for pid in [self.root, *_children(self.root)]:
                if "python" not in _cmdline(pid) and not _comm(pid).startswith(("VLLM", "vllm")):
                    continue
                handle.write(f"--- pid {pid} {_comm(pid)}\n")
                handle.flush()
                subprocess.run(
                    [self.spy, "dump", "--nonblocking", "--pid", str(pid)],
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    timeout=30,
                    check=False,
                )


def _record(
    spy: str | None, pids: dict[str, int], out_dir: Path, tag: str
) -> list[subprocess.Popen[bytes]]:
    procs: list[subprocess.Popen[bytes]] = []
    if spy is None:
        return procs
    for name, pid in pids.items():
        procs.append(
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "--nonblocking",
                    "--idle",
                    "-r",
                    "50",
                    "-f",
                    "raw",
                    "-o",
                    str(out_dir / f"{tag}-{name}.folded"),
                    "--pid",
                    str(pid),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return procs


def _stop_records(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _windows(log_text: str) -> list[dict[str, Any]]:
    return [
        {"time": t, "prompt_tokens_per_s": float(rate), "running": int(run), "waiting": int(wait)}
        for t, rate, run, wait in _WINDOW.findall(log_text)
    ]


def _served_side(
    setup_: dict[str, Any],
    work: Path,
    shape: str,
    model: Path,
    jsonl: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    spy = setup_.get("py_spy") if args.profile else None
    profile_dir = work / "profile"
    profile_dir.mkdir(exist_ok=True)
    env = _env(setup_)
    caches = work / f"caches-served-{shape}"
    shutil.rmtree(caches, ignore_errors=True)
    env.update(
        {
            "VLLM_CACHE_ROOT": str(caches / "vllm"),
            "TRITON_CACHE_DIR": str(caches / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        }
    )
    prepared = work / f"prepared-{shape}"
    if not prepared.is_dir():
        _say(f"served ({shape}): speculators prepare-data")
        _run(
            [
                setup_["python"],
                "-m",
                "speculators",
                "prepare-data",
                "--model",
                str(model),
                "--data",
                str(jsonl),
                "--output",
                str(prepared),
                "--seq-length",
                str(args.prompt_len + 8),
                "--overwrite",
            ],
            work / f"prepare-{shape}.log",
            env,
            900,
        )
    store = SHM / "pw-bench" / f"server-{shape}"
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    port = _free_port()
    spec_config = {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {
            "hf_config": {"eagle_aux_hidden_state_layer_ids": _layer_ids(shape)}
        },
    }
    kv_config = {
        "kv_connector": "ExampleHiddenStatesConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": str(store)},
    }
    argv = [
        setup_["python"],
        "-m",
        "vllm.entrypoints.cli.main",
        "serve",
        str(model),
        "--speculative_config",
        json.dumps(spec_config),
        "--kv_transfer_config",
        json.dumps(kv_config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "bfloat16",
        "--max-model-len",
        str(args.prompt_len + 8),
        "--max-num-batched-tokens",
        str(MAX_BATCHED_TOKENS),
        "--gpu-memory-utilization",
        str(GPU_MEMORY_UTILIZATION),
        "--load-format",
        "dummy",
    ]
    log = work / f"serve-{shape}.log"
    log.unlink(missing_ok=True)
    _say(f"served ({shape}): vllm serve starting")
    launched = time.time()
    handle = log.open("ab")
    server = subprocess.Popen(
        argv, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    sampler = _Sampler(spy, server.pid, profile_dir / f"startup-{shape}.txt")
    result: dict[str, Any] = {"server_args": argv[4:], "clients": {}}
    try:
        next_dump = time.time() + 5
        while True:
            if server.poll() is not None:
                raise SystemExit(
                    f"vllm serve exited {server.returncode}:\n"
                    f"{log.read_text(errors='replace')[-4000:]}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.time() >= next_dump:
                sampler.dump_once()
                next_dump = time.time() + args.dump_every
            if time.time() - launched > args.side_timeout:
                raise SystemExit("vllm serve not ready in time")
            time.sleep(0.5)
        ready = time.time() - launched
        result["server_ready_s"] = round(ready, 2)
        _say(f"served ({shape}): ready after {ready:.1f} s")
        pids = {"server": server.pid}
        for pid in _children(server.pid):
            if "EngineCore" in _comm(pid) or "EngineCore" in _cmdline(pid):
                pids["engine"] = pid
        result["processes"] = {k: _comm(v) for k, v in pids.items()}
        for client in args.clients.split(","):
            front = [] if client == "target" else [setup_["upstream_site"]]
            cenv = _env(setup_, *front)
            out_root = SHM / "pw-bench" / f"files-{shape}-{client}"
            shutil.rmtree(out_root, ignore_errors=True)
            base = [
                setup_["python"],
                "-m",
                "speculators",
                "generate-offline-data",
                "--endpoint",
                f"http://127.0.0.1:{port}/v1",
                "--preprocessed-data",
                str(prepared),
                "--fail-on-error",
            ]
            clog = work / f"client-{shape}-{client}.log"
            clog.unlink(missing_ok=True)
            t0 = time.perf_counter()
            warm = _run(
                [*base, "--output", str(out_root / "warmup"), "--max-samples", str(args.warmup)],
                clog,
                cenv,
                args.side_timeout,
            )
            warm_s = time.perf_counter() - t0
            warm_found = _TIMING.findall(warm)
            log_mark = len(log.read_text(errors="replace"))
            records = _record(spy, pids, profile_dir, f"{shape}-{client}")
            client_spy = []
            if spy is not None:
                client_spy = [
                    spy,
                    "record",
                    "--nonblocking",
                    "-r",
                    "50",
                    "-f",
                    "raw",
                    "-o",
                    str(profile_dir / f"{shape}-{client}-client.folded"),
                    "--",
                ]
            t1 = time.perf_counter()
            text = _run(
                [*client_spy, *base, "--output", str(out_root / "measured")],
                clog,
                cenv,
                args.side_timeout,
            )
            wall = time.perf_counter() - t1
            _stop_records(records)
            found = _TIMING.findall(text)
            if not found:
                raise SystemExit(f"{client}: no timing line in {clog}")
            elapsed, rate = (float(x) for x in found[-1])
            files = len(list((out_root / "measured").glob("hs_*.safetensors")))
            tokens = files * args.prompt_len
            windows = _windows(log.read_text(errors="replace")[log_mark:])
            speculators_version = (
                setup_["versions"]["speculators"]
                if client == "target"
                else setup_["upstream_speculators"]
            )
            result["clients"][client] = {
                "speculators": speculators_version,
                "warmup": {
                    "prompts": args.warmup,
                    "command_s": round(warm_s, 2),
                    "elapsed_s": float(warm_found[-1][0]) if warm_found else None,
                },
                "elapsed_s": elapsed,
                "samples_per_s": rate,
                "files": files,
                "tokens_per_s": round(tokens / elapsed, 1),
                "command_wall_s": round(wall, 2),
                "engine_windows": windows,
            }
            shutil.rmtree(out_root, ignore_errors=True)
            _say(
                f"served ({shape}) {client} client: {tokens / elapsed:,.0f} tokens/s "
                f"({files} files)"
            )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        handle.close()
        shutil.rmtree(store, ignore_errors=True)
    return result


# --------------------------------------------------------------------------- profile summary
def _top(folded: Path, limit: int = 20) -> dict[str, Any]:
    """The profile's summary from py-spy's folded stacks (idle samples included, so shares are
    of wall time): each function's own share (the leaf frame) and its inclusive share, the
    frames every sample shares (entry points and wrappers, over 90 %) left out."""
    total = 0
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for line in folded.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        for frame in set(frames[1:]):  # the first is the thread
            inclusive[frame] += n
    if not total:
        return {"samples": 0, "own": [], "inclusive": []}
    return {
        "samples": total,
        "own": [{"function": f, "share": round(n / total, 3)} for f, n in own.most_common(limit)],
        "inclusive": [
            {"function": f, "share": round(n / total, 3)}
            for f, n in inclusive.most_common(limit * 3)
            if n / total <= 0.9
        ][:limit],
    }


_RATE_HZ = 50  # py-spy's sampling rate in _record
_ENGINE_ENTRY = "<module> (<string>:1)"  # the engine core's main thread (a spawned process)


def _engine_main(folded: Path) -> dict[str, Any]:
    """The engine core's main thread: seconds in engine steps (``_process_engine_step``) and
    waiting for requests (``_process_input_queue``), and where the step time goes."""
    busy = waiting = total = 0
    inside: collections.Counter[str] = collections.Counter()
    for line in folded.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        if frames[0] != _ENGINE_ENTRY:
            continue
        n = int(count)
        total += n
        if any("_process_engine_step" in f for f in frames):
            busy += n
            for frame in set(frames):
                inside[frame] += n
        elif any("_process_input_queue" in f for f in frames):
            waiting += n
    return {
        "seconds": round(total / _RATE_HZ, 2),
        "step_s": round(busy / _RATE_HZ, 2),
        "waiting_for_requests_s": round(waiting / _RATE_HZ, 2),
        "in_steps": [
            {"function": f, "share_of_steps": round(n / busy, 3)}
            for f, n in inside.most_common(40)
            if busy and n / busy <= 0.9
        ][:15],
    }


def _profiles(profile_dir: Path, shape: str) -> dict[str, Any]:
    profiles: dict[str, Any] = {}
    for folded in sorted(profile_dir.glob(f"{shape}-*.folded")):
        profiles[folded.stem] = _top(folded)
        if folded.stem.endswith("-engine"):
            profiles[folded.stem]["main_thread"] = _engine_main(folded)
    return profiles


def reprofile(args: argparse.Namespace) -> int:
    """Summarise the profiles of a report again from its folded stacks (PROFILE_DIR)."""
    path: Path = args.report
    data = json.loads(path.read_text())
    for shape, rep in data["shapes"].items():
        rep["profile"] = _profiles(args.profile_dir, shape)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    work: Path = args.work
    setup_ = _setup_of(work)
    report_path: Path = args.report
    report: dict[str, Any] = (
        json.loads(report_path.read_text())
        if report_path.is_file()
        else {
            "benchmark": "served_gpu",
            "shapes": {},
            "machine": {},
            "setup": setup_,
        }
    )
    try:
        gpu = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,driver_version,compute_cap",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except FileNotFoundError:
        gpu = "none (no nvidia-smi)"
    report["machine"] = {"gpu": gpu, "cpus": os.cpu_count(), "python": sys.version.split()[0]}
    report["date"] = time.strftime("%Y-%m-%d")
    (SHM / "pw-bench").mkdir(parents=True, exist_ok=True)
    report["shm"] = _dd(SHM / "pw-bench")
    shape_report = report["shapes"].setdefault(args.shape, {})
    shape_report.update(
        {
            "dims": SHAPES[args.shape],
            "prompts": args.prompts,
            "prompt_len": args.prompt_len,
            "layer_ids": _layer_ids(args.shape),
            "max_num_batched_tokens": MAX_BATCHED_TOKENS,
            "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
            "warmup_prompts": args.warmup,
        }
    )
    model = _model(setup_, work, args.shape)
    prompts, jsonl = _prompts(work, args.shape, args.prompts, args.prompt_len)

    def save() -> None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(portable(report, work), indent=2) + "\n")

    for side in args.sides.split(","):
        try:
            if side in ("prefill", "offline"):
                shape_report[side] = _llm_side(setup_, work, args.shape, model, prompts, args, side)
            elif side == "served":
                shape_report["served"] = _served_side(setup_, work, args.shape, model, jsonl, args)
            else:
                raise SystemExit(f"unknown side {side!r}")
        except (SystemExit, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
            shape_report[side] = {"error": str(exc)[-3000:]}
            _say(f"{side} ({args.shape}) failed: {str(exc)[-500:]}")
        if args.profile:
            shape_report["profile"] = _profiles(work / "profile", args.shape)
        save()
    return 0


def portable(data: Any, work: Path) -> Any:
    """The report with the machine's own paths named by role: the work folder as ``$WORK``,
    the machine's python as ``python3`` (a committed report names no path of the machine)."""
    python = (
        json.loads(json.dumps(data)).get("setup", {}).get("python")
        if isinstance(data, dict)
        else None
    )

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            if python and value == python:
                return "python3"
            return value.replace(str(work), "$WORK")
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        return value

    return fix(data)


def make_portable(args: argparse.Namespace) -> int:
    """Rewrite a report written by an earlier version of this script (absolute paths)."""
    path: Path = args.report
    path.write_text(json.dumps(portable(json.loads(path.read_text()), args.work), indent=2) + "\n")
    return 0


# --------------------------------------------------------------------------- render
def render(args: argparse.Namespace) -> int:
    """The report's page, as ``python -m patchwheel.results`` writes it under docs/results/."""
    sys.path.insert(0, str(SRC))  # patchwheel.errors; the page module alone, not its package
    spec = importlib.util.spec_from_file_location(
        "served_paths", SRC / "patchwheel" / "results" / "served_paths.py"
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {SRC}/patchwheel/results/served_paths.py")
    served_paths = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(served_paths)
    data = json.loads(Path(args.report).read_text())
    print(
        "\n".join([f"# {served_paths.title(data)}", "", *served_paths.body(data, str(args.report))])
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p_setup = sub.add_parser("setup")
    p_setup.add_argument("--wheelhouse", type=Path, required=True)
    p_setup.add_argument("--work", type=Path, required=True)
    p_setup.add_argument("--upstream-speculators", type=Path, required=True)
    p_setup.add_argument("--py-spy", type=Path, default=None)
    p_run = sub.add_parser("run")
    p_run.add_argument("--work", type=Path, required=True)
    p_run.add_argument("--shape", choices=sorted(SHAPES), default="bench")
    p_run.add_argument("--sides", default="prefill,offline,served")
    p_run.add_argument("--clients", default="target,upstream")
    p_run.add_argument("--prompts", type=int, default=2048)
    p_run.add_argument("--prompt-len", type=int, default=1024)
    p_run.add_argument("--warmup", type=int, default=256)
    p_run.add_argument("--report", type=Path, required=True)
    p_run.add_argument("--profile", action="store_true")
    p_run.add_argument("--dump-every", type=float, default=10.0)
    p_run.add_argument("--side-timeout", type=float, default=560.0)
    p_render = sub.add_parser("render")
    p_render.add_argument("report", type=Path)
    p_reprofile = sub.add_parser("reprofile", help="summarise a report's profiles again")
    p_reprofile.add_argument("report", type=Path)
    p_reprofile.add_argument("--profile-dir", type=Path, required=True)
    p_portable = sub.add_parser("portable", help="name the work folder $WORK in a report")
    p_portable.add_argument("report", type=Path)
    p_portable.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    verbs = {
        "setup": setup,
        "run": run,
        "render": render,
        "portable": make_portable,
        "reprofile": reprofile,
    }
    return verbs[args.verb](args)


if __name__ == "__main__":
    raise SystemExit(main())
