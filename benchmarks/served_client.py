"""What speculators' own client costs per sample, unpatched against patched, on this machine.

The served generation's throughput is bounded by the slowest of three processes: the engine,
vLLM's API server, and speculators' `generate-offline-data` client (one asyncio event loop).
This benchmark isolates the client: it runs the real `speculators generate-offline-data` of
two speculators builds (the index's 0.9.0 and a target's patched wheel) against one stand-in
server on 127.0.0.1 that answers every completion the way vLLM's extract_hidden_states server
does (the prompt's token ids, `kv_transfer_params.hidden_states_path` naming a file it wrote),
and reads each client's own CPU time from the kernel (wait4's rusage). CPU per sample is the
figure that carries over to any machine: a client that spends C ms of event-loop CPU per sample
cannot send more than 1000 / C samples per second, whatever the GPU.

    python benchmarks/served_client.py --python VENV/bin/python \
        --patched build/spec-0.9-vllm-0.26/wheels/speculators-0.9.0+pw….whl \
        --prompts 2048 --json reports/bench/DATE-served-client.json

VENV has speculators 0.9.0 from the index (and its dependencies); the patched side runs the
same interpreter with the patched wheel's files first on sys.path. Both sides send the same
prepared dataset (`speculators prepare-data` of random token prompts, run once).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

_TIMING = re.compile(r"Timing: ([0-9.]+)s elapsed, ([0-9.]+) samples/s")

# The stand-in server, run with the benchmark's own interpreter (standard library only).
_SERVER = r"""
import json, os, sys, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STORE = sys.argv[2]
PAYLOAD = b"\0" * int(sys.argv[3])

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._send({"object": "list", "data": [{"id": "model", "object": "model",
                    "created": 0, "owned_by": "vllm"}]})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ids = body["prompt"]
        name = uuid.uuid4().hex
        path = os.path.join(STORE, name + ".safetensors")
        with open(path, "wb") as handle:
            handle.write(PAYLOAD)
        self._send({
            "id": "cmpl-" + name, "object": "text_completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "text": "x", "logprobs": None, "finish_reason": "length",
                         "stop_reason": None, "prompt_logprobs": None,
                         "prompt_token_ids": ids, "token_ids": [0]}],
            "usage": {"prompt_tokens": len(ids), "total_tokens": len(ids) + 1,
                      "completion_tokens": 1},
            "kv_transfer_params": {"hidden_states_path": path},
        })

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.request_queue_size = 1024
server.daemon_threads = True
server.serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _prepare(python: Path, work: Path, prompts: int, length: int, env: dict[str, str]) -> Path:
    """A tiny tokenizer (patchwheel's verify model), random prompts, speculators prepare-data."""
    model = work / "model"
    src = Path(__file__).resolve().parents[1] / "src"
    subprocess.run(
        [
            str(python),
            "-c",
            "import sys; from pathlib import Path; "
            "from patchwheel.verify.models.tiny import TinyLlamaSpec, make_tiny_llama; "
            "spec = TinyLlamaSpec(); make_tiny_llama(spec, Path(sys.argv[1]))",
            str(model),
        ],
        check=True,
        env={**env, "PYTHONPATH": str(src)},
    )
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    rng = random.Random(7)
    data = work / "tokens.jsonl"
    with data.open("w", encoding="utf-8") as handle:
        for _ in range(prompts):
            ids = [rng.randrange(3, vocab) for _ in range(length)]
            handle.write(json.dumps({"input_ids": ids, "loss_mask": [1] * length}) + "\n")
    prepared = work / "prepared"
    subprocess.run(
        [
            str(python),
            "-m",
            "speculators",
            "prepare-data",
            "--model",
            str(model),
            "--data",
            str(data),
            "--output",
            str(prepared),
            "--seq-length",
            str(length + 8),
            "--overwrite",
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return prepared


def _unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    return into


def _client(
    python: Path,
    prepared: Path,
    port: int,
    out: Path,
    concurrency: int | None,
    env: dict[str, str],
    log: Path,
    profile: Path | None = None,
) -> dict[str, Any]:
    argv = [
        str(python),
        "-m",
        "speculators",
        "generate-offline-data",
        "--endpoint",
        f"http://127.0.0.1:{port}/v1",
        "--preprocessed-data",
        str(prepared),
        "--output",
        str(out),
        "--fail-on-error",
    ]
    if concurrency is not None:
        argv += ["--concurrency", str(concurrency)]
    start = time.perf_counter()
    with log.open("wb") as handle:
        if profile is not None:  # py-spy beside the venv's python: folded stacks
            spy = str(python.parent / "py-spy")
            argv = [spy, "record", "-f", "raw", "-r", "100", "-o", str(profile), "--", *argv]
        proc = subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    text = log.read_text(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"client failed ({log}):\n{text[-2000:]}")
    found = _TIMING.findall(text)
    if not found:
        raise SystemExit(f"client printed no timing line ({log}):\n{text[-3000:]}")
    elapsed, rate = (float(x) for x in found[-1])
    files = len(list(out.glob("hs_*.safetensors")))
    return {
        "concurrency": concurrency,
        "elapsed_s": elapsed,
        "samples_per_s": rate,
        "files": files,
        "command_wall_s": round(wall, 2),
        "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", type=Path, required=True, help="a venv's python with speculators 0.9.0"
    )
    parser.add_argument(
        "--patched", type=Path, required=True, help="the target's speculators wheel"
    )
    parser.add_argument("--prompts", type=int, default=2048)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--file-bytes", type=int, default=4096)
    parser.add_argument(
        "--concurrency",
        type=int,
        action="append",
        default=None,
        help="client concurrency (repeatable); default: speculators' own default only",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="folder for py-spy's folded stacks of each client (py-spy in the venv)",
    )
    args = parser.parse_args(argv)
    concurrencies: list[int | None] = [None, *(args.concurrency or [])]
    work = Path(tempfile.mkdtemp(prefix="served-client-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    env["COLUMNS"] = "400"  # rich wraps its log lines at 80 columns when not on a terminal
    try:
        print(f"preparing {args.prompts} x {args.prompt_len} tokens …", flush=True)
        prepared = _prepare(args.python, work, args.prompts, args.prompt_len, env)
        patched_dir = _unpack(args.patched, work / "patched")
        store = work / "store"
        store.mkdir()
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(port), str(store), str(args.file_bytes)]
        )
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            sides: dict[str, list[dict[str, Any]]] = {"unpatched": [], "patched": []}
            for concurrency in concurrencies:
                for side, figures in sides.items():
                    side_env = dict(env)
                    if side == "patched":
                        side_env["PYTHONPATH"] = str(patched_dir)
                    out = work / f"out-{side}-{concurrency}"
                    figure = _client(
                        args.python,
                        prepared,
                        port,
                        out,
                        concurrency,
                        side_env,
                        work / f"{side}-{concurrency}.log",
                        None
                        if args.profile is None
                        else args.profile / f"{side}-{concurrency}.folded",
                    )
                    figure["client_cpu_ms_per_sample"] = round(
                        1000 * figure["client_cpu_s"] / max(figure["files"], 1), 2
                    )
                    figures.append(figure)
                    shown = "default (32)" if concurrency is None else str(concurrency)
                    print(
                        f"{side:9} concurrency {shown:>12}: {figure['samples_per_s']:8.1f} "
                        f"samples/s, client CPU {figure['client_cpu_ms_per_sample']:.2f} "
                        f"ms/sample, {figure['files']} files",
                        flush=True,
                    )
                    shutil.rmtree(out, ignore_errors=True)
        finally:
            server.terminate()
            server.wait()
        result = {
            "benchmark": "served_client",
            "date": time.strftime("%Y-%m-%d"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "prompts": args.prompts,
            "prompt_len": args.prompt_len,
            "file_bytes": args.file_bytes,
            "patched_wheel": args.patched.name,
            "sides": sides,
        }
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {args.json}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
