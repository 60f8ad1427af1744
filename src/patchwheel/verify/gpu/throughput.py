"""Extraction vs vLLM's own ``LLM.generate(max_tokens=1)`` prefill, tokens/s on the same
prompts and a model big enough to load the GPU.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.errors import VerifyError
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.model import TinyLlamaSpec, make_tiny_llama

SPEED_SCRIPT = Path(__file__).parent.parent / "speed.py"
# A model that loads an H200-class GPU: ~1.1 B parameters, Llama layout.
BENCH_SPEC = TinyLlamaSpec(
    seed=1234,
    num_layers=16,
    hidden_size=2048,
    intermediate_size=5632,
    num_heads=16,
    num_kv_heads=8,
    vocab_size=32000,
    initializer_range=0.02,
)


# --------------------------------------------------------------------------- throughput


def bench_model(options: GpuOptions, console: Console) -> tuple[Path, int]:
    """The throughput model (given, or a generated ~1 B-parameter random Llama) and its vocab."""
    if options.model is not None:
        config = json.loads((options.model / "config.json").read_text("utf-8"))
        return options.model, int(config["vocab_size"])
    with console.status("generating the benchmark model (random Llama, hidden 2048, 16 layers)"):
        path = make_tiny_llama(BENCH_SPEC, options.work_dir / "bench-model", dtype=options.dtype)
    return path, BENCH_SPEC.vocab_size


def measure_throughput(options: GpuOptions, runtime: Runtime, console: Console) -> dict[str, Any]:
    """Extraction vs ``LLM.generate(max_tokens=1)`` prefill tokens/s on the same prompts."""
    model_dir, vocab = bench_model(options, console)
    layers = BENCH_SPEC.num_layers if options.model is None else _num_layers(model_dir)
    settings = {
        "dtype": options.dtype,
        "max_model_len": options.prompt_len + 8,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "max_num_seqs": 32,  # the generator's own MAX_NUM_SEQS
        "gpu_memory_utilization": 0.8,
        "tensor_parallel_size": 1,
    }
    request = {
        "model_dir": str(model_dir),
        "layer_ids": [2, layers // 2, layers - 3, layers - 1],
        "random_prompts": {
            "count": options.prompts,
            "length": options.prompt_len,
            "vocab_size": vocab,
            "seed": 7,
        },
        "repeats": options.repeats,
        "settings": settings,
    }
    out: dict[str, Any] = {
        "model": str(model_dir) if options.model else "random Llama, hidden 2048, 16 layers",
        "prompts": options.prompts,
        "prompt_len": options.prompt_len,
        "tokens": options.prompts * options.prompt_len,
        "settings": settings,
        "layer_ids": request["layer_ids"],
    }
    out["extraction"] = _side(options, runtime, "speculators", request, "extraction", console)
    for mode in options.baseline_modes:
        settings["enforce_eager"] = mode == "eager"
        out[f"vllm_{mode}"] = _side(options, runtime, "vllm", request, f"vllm-{mode}", console)
    for mode in options.baseline_modes:
        base = out[f"vllm_{mode}"]["tokens_per_s"]
        out[f"ratio_vs_{mode}"] = round(out["extraction"]["tokens_per_s"] / base, 3)
    if options.tp > 1 and options.tp_throughput:
        settings["tensor_parallel_size"] = options.tp
        out[f"extraction_tp{options.tp}"] = _side(
            options, runtime, "speculators", request, f"extraction-tp{options.tp}", console
        )
    return out


def _num_layers(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text("utf-8"))
    return int(config["num_hidden_layers"])


def _side(
    options: GpuOptions,
    runtime: Runtime,
    side: str,
    request: dict[str, Any],
    name: str,
    console: Console,
) -> dict[str, Any]:
    bench = options.work_dir / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    request_path = bench / f"{name}.request.json"
    request_path.write_text(json.dumps(request), "utf-8")
    out = bench / f"{name}.json"
    log = bench / f"{name}.log"
    with console.status(f"timing {name}"), log.open("w") as fh:
        proc = subprocess.run(
            [runtime.python, str(SPEED_SCRIPT), side, str(request_path), str(out)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=runtime.env,
            check=False,
            timeout=1800,
        )
    if proc.returncode != 0 or not out.is_file():
        tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-25:])
        raise VerifyError(f"timing {name} failed (log {log}):\n{tail}")
    figures: dict[str, Any] = json.loads(out.read_text("utf-8"))
    console.print(
        f"{name}: {figures['tokens_per_s']:,.0f} tokens/s "
        f"(best of {len(figures['seconds'])}, start-up {figures['startup_s']:.1f} s)"
    )
    return figures
