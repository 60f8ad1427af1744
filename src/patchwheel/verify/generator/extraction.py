"""One run of ``extract.py`` (speculators' own generator, in the python that has the wheels),
read back and compared with transformers; shared by the CPU and the GPU session.

The script writes ``result.json`` and ``hidden_states.safetensors`` into its folder, or
``failure.json`` when it crashes; a crash is explained
(:mod:`patchwheel.verify.generator.crash`) by the speculators line and the vLLM function it
called.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.crash import diagnose, read_failure
from patchwheel.verify.generator.plan import VerifyPlan
from patchwheel.verify.oracles.compare import Extracted, TensorCheck, compare_call
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream
from patchwheel.verify.payloads import script

EXTRACT_SCRIPT = script("extract")
LOG_NAME = "extract.log"


@dataclass(frozen=True)
class Extraction:
    """What the extraction subprocess produced."""

    results: list[list[Extracted]]
    seconds: list[float]
    versions: dict[str, str]
    startup_s: float
    wall_s: float
    log: Path
    # The generator's settings as requested, and as its engine runs them (extract.py reads
    # them back from the engine's config, scheduler and workers).
    requested: dict[str, Any]
    effective: dict[str, Any]


def run_script(
    python: str | Path,
    script: Path,
    request: Path,
    out_dir: Path,
    *,
    env: Mapping[str, str],
    timeout_s: float,
    cwd: Path | None = None,
    label: str | None = None,
) -> tuple[float, Path]:
    """Run ``script request out_dir`` with ``python``; return (wall seconds, log).

    Raises VerifyError explaining a crash (from the failure record), a run without one that
    exits non-zero (the log's tail) and a timeout. ``label`` names the run in those errors
    (``extraction at tensor parallel 2``); without it they speak of the extraction itself.
    """
    what = label or "hidden-state extraction"
    log = out_dir / LOG_NAME
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        try:
            proc = subprocess.run(
                [str(python), str(script), str(request), str(out_dir)],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise VerifyError(f"{what} did not finish in {timeout_s:.0f} s (log: {log})") from exc
    wall = time.monotonic() - started
    log_text = log.read_text(encoding="utf-8", errors="replace")
    failure = read_failure(out_dir)
    if failure is not None:
        message = diagnose(failure, log_text).message(log)
        raise VerifyError(f"{label} failed: {message}" if label else message)
    if proc.returncode != 0:
        tail = "\n".join(log_text.strip().splitlines()[-20:])
        raise VerifyError(
            f"{what} exited {proc.returncode} without a failure record (log: {log})\n{tail}"
        )
    return wall, log


def run_in_folder(
    python: str | Path,
    script: Path,
    request: dict[str, Any],
    out_dir: Path,
    calls: list[list[list[int]]],
    *,
    env: Mapping[str, str],
    timeout_s: float,
    label: str | None = None,
) -> Extraction:
    """Run a copy of ``script`` (a standalone side: extract.py, oracle.py) in a fresh
    ``out_dir`` with ``request`` as its ``request.json``, that folder the working directory,
    and read back what it wrote; a crash, an exit without a record or a timeout raise
    VerifyError as :func:`run_script` explains them."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    local = out_dir / script.name
    shutil.copyfile(script, local)
    request_path = out_dir / "request.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    wall, log = run_script(
        python,
        local,
        request_path,
        out_dir,
        env=env,
        timeout_s=timeout_s,
        cwd=out_dir,
        label=label,
    )
    return load_extraction(out_dir, calls, wall, log)


def load_extraction(
    out_dir: Path, calls: list[list[list[int]]], wall: float, log: Path
) -> Extraction:
    """What extract.py wrote to out_dir (result.json and hidden_states.safetensors)."""
    from safetensors.torch import load_file

    result: dict[str, Any] = json.loads((out_dir / "result.json").read_text(encoding="utf-8"))
    tensors = load_file(str(out_dir / "hidden_states.safetensors"))
    results: list[list[Extracted]] = []
    for c, call in enumerate(result["calls"]):
        per_prompt = []
        for p in range(int(call["num_results"])):
            layers: list[Any] = []
            while (key := f"call{c}.prompt{p}.layer{len(layers)}") in tensors:
                layers.append(tensors[key])
            ids = tensors[f"call{c}.prompt{p}.input_ids"].tolist()
            per_prompt.append(Extracted(input_ids=[int(i) for i in ids], hidden_states=layers))
        results.append(per_prompt)
    if len(results) != len(calls):
        raise VerifyError(
            f"{out_dir / 'result.json'} has {len(results)} calls, expected {len(calls)}"
        )
    return Extraction(
        results=results,
        seconds=[float(c["seconds"]) for c in result["calls"]],
        versions={str(k): str(v) for k, v in result["versions"].items()},
        startup_s=float(result["startup_seconds"]),
        wall_s=wall,
        log=log,
        # extract.py writes both; the vLLM oracle (oracle.py) its engine's effective_settings.
        requested=dict(result.get("requested") or {}),
        effective=dict(result.get("effective") or result.get("effective_settings") or {}),
    )


def reference_settings(model: Any) -> dict[str, Any]:
    """What the transformers side runs with, read from the loaded model."""
    import torch
    import transformers

    return {
        "library": f"transformers {transformers.__version__}",
        "torch": torch.__version__,
        "model_class": type(model).__qualname__,
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "attn_implementation": model.config._attn_implementation,
        "device": str(next(model.parameters()).device),
        "batch": "each prompt alone (batch of one, no padding, no KV cache)",
    }


def compare_with_reference(
    plan: VerifyPlan, model_dir: Path, calls: list[list[list[int]]], extraction: Extraction
) -> tuple[list[TensorCheck], dict[str, Any]]:
    """Every returned tensor against transformers' residual stream on the same weights, and
    the reference side's effective settings."""
    model = load_reference_model(model_dir, plan.dtype)
    checks: list[TensorCheck] = []
    for c, prompts in enumerate(calls):
        reference = residual_stream(model, prompts, plan.layer_ids)
        checks.extend(
            compare_call(c, prompts, extraction.results[c], reference, plan.layer_ids, plan.dtype)
        )
    return checks, reference_settings(model)
