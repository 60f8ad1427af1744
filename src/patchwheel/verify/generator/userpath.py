"""The user's path: speculators' own library pipeline in the verify venv, checked stage by stage.

A tiny Llama with a chat-template tokenizer (:mod:`patchwheel.verify.models.chat`) and
ShareGPT-style conversations go through :mod:`patchwheel.verify.payloads.pipeline` (run by the
venv's python): preprocessing with the chat template, ``VllmHiddenStatesGenerator`` with the user's
defaults, ``data_<i>.pt`` + ``data_config.json`` + ``token_freq.pt``, the vocabulary mapping, the
EAGLE-3 draft config and model as speculators' trainer builds them, its own data loader, a
forward pass and a checkpoint. Here the preprocessing is checked against the template (tokens
and loss-mask lengths of every conversation), and every file's hidden states against
transformers. A stage that raises fails verification naming the stage and speculators' call.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.models.chat import (
    CONVERSATIONS,
    expected_samples,
    sharegpt_records,
    write_chat_tokenizer,
    write_sharegpt,
)
from patchwheel.verify.models.tiny import TinyLlamaSpec, make_tiny_llama
from patchwheel.verify.oracles.compare import TensorCheck, check_tensor
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream
from patchwheel.verify.payloads import script

PIPELINE_SCRIPT = script("pipeline")
LOG_NAME = "pipeline.log"


@dataclass(frozen=True)
class UserPathPlan:
    """The user's run: an 8-layer model (speculators' own layer choice [2, 4, 5, 7]), the
    conversations of chat.CONVERSATIONS, and the draft's training settings."""

    spec: TinyLlamaSpec = field(default_factory=lambda: TinyLlamaSpec(num_layers=8))
    seq_length: int = 512
    batch_size: int = 4
    draft_vocab_size: int = 64
    ttt_steps: int = 3
    # speculators torch.compile's the draft forward; on CPU inductor takes minutes for it, so
    # by default the same forward runs eagerly (torch.compiler.set_stance("force_eager")).
    compile_draft: bool = False
    gpu_memory_utilization: float = 0.3

    def request(self, model_dir: Path, dataset: Path, work: Path) -> dict[str, Any]:
        """The request pipeline.py reads (no dtype: the user's default, speculators' own)."""
        return {
            "model_dir": str(model_dir),
            "dataset": str(dataset),
            "seq_length": self.seq_length,
            "hf_cache_dir": str(work / "hf-cache"),
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "batch_size": self.batch_size,
            "draft_vocab_size": self.draft_vocab_size,
            "total_seq_len": self.seq_length,
            "ttt_steps": self.ttt_steps,
            "compile_draft": self.compile_draft,
            "num_proc": 1,
        }


@dataclass
class UserPathResult:
    """What the user's path did: stages with seconds, files, checks, or where it failed."""

    status: str = "not run"  # "passed", "failed" (a stage raised) or "mismatch"
    stage_seconds: dict[str, float] = field(default_factory=dict)
    failure: dict[str, Any] | None = None
    layer_ids: list[int] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    preprocessing_matches_template: bool | None = None
    dtype: str | None = None
    checks: list[TensorCheck] = field(default_factory=list)
    forward: dict[str, Any] | None = None
    checkpoint_files: list[str] = field(default_factory=list)
    wall_s: float | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        failed = [c for c in self.checks if not c.ok]
        return {
            "status": self.status,
            "stage_seconds": self.stage_seconds,
            "failure": self.failure,
            "layer_ids": self.layer_ids,
            "data_files": self.data_files,
            "preprocessing_matches_template": self.preprocessing_matches_template,
            "hidden_states": {
                "dtype": self.dtype,
                "checks": len(self.checks),
                "failed": [c.describe() for c in failed],
                "max_abs_error": max((c.max_abs_error or 0.0 for c in self.checks), default=None),
            },
            "forward": self.forward,
            "checkpoint_files": self.checkpoint_files,
            "wall_s": self.wall_s,
            "error": self.error,
        }


def prepare_inputs(plan: UserPathPlan, work: Path) -> tuple[Path, Path]:
    """The chat model and the ShareGPT-style dataset, in work."""
    model_dir = make_tiny_llama(plan.spec, work / "chat-model")
    write_chat_tokenizer(model_dir, plan.spec.vocab_size, plan.spec.max_position_embeddings)
    dataset = write_sharegpt(sharegpt_records(plan.spec.vocab_size), work / "sharegpt.json")
    return model_dir, dataset


def _failure_message(failure: Mapping[str, Any], log: Path) -> str:
    frame = failure.get("speculators_frame")
    return (
        f"the user's pipeline failed at stage {failure.get('stage')}: "
        f"{failure.get('call')} raised {failure.get('error')}"
        + (f" (innermost speculators frame: {frame})" if frame else "")
        + f". Full log: {log}"
    )


def run_user_path(
    python: Path, plan: UserPathPlan, work: Path, *, env: Mapping[str, str], timeout_s: float
) -> UserPathResult:
    """Run the pipeline in the venv of `python`, check its outputs; VerifyError on failure
    (the result, with what was done before, is in the error's ``result``)."""
    started = time.monotonic()
    if work.exists():
        shutil.rmtree(work)
    out = work / "pipeline"
    out.mkdir(parents=True)
    model_dir, dataset = prepare_inputs(plan, work)
    request = work / "request.json"
    request.write_text(json.dumps(plan.request(model_dir, dataset, work)), encoding="utf-8")
    script = work / PIPELINE_SCRIPT.name
    shutil.copyfile(PIPELINE_SCRIPT, script)
    log = work / LOG_NAME
    with log.open("w", encoding="utf-8") as handle:
        try:
            proc = subprocess.run(
                [str(python), str(script), str(request), str(out)],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=work,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise VerifyError(
                f"the user's pipeline did not finish in {timeout_s:.0f} s ({log})"
            ) from exc
    result = UserPathResult()
    done = out / "result.json"
    if not done.is_file():
        tail = "\n".join(log.read_text(errors="replace").strip().splitlines()[-20:])
        raise UserPathFailed(
            result, f"the user's pipeline exited {proc.returncode} without a result ({log})\n{tail}"
        )
    data: dict[str, Any] = json.loads(done.read_text(encoding="utf-8"))
    result.stage_seconds = {str(k): float(v) for k, v in data.get("stage_seconds", {}).items()}
    result.layer_ids = [int(i) for i in data.get("layer_ids", [])]
    result.data_files = list(data.get("data_files", []))
    result.forward = data.get("forward")
    result.checkpoint_files = list(data.get("checkpoint_files", []))
    if "sample_lengths" in data:
        got = sorted(zip(data["sample_lengths"], data["loss_mask_tokens"], strict=True))
        result.preprocessing_matches_template = got == expected_samples(CONVERSATIONS)
    if data.get("status") != "passed":
        result.status = "failed"
        result.failure = data.get("failure")
        result.error = _failure_message(result.failure or {}, log)
        result.wall_s = time.monotonic() - started
        raise UserPathFailed(result, result.error)
    compare_started = time.monotonic()
    dtype, result.checks = compare_files(model_dir, out / "data", result.layer_ids)
    result.dtype = dtype
    result.stage_seconds["compare"] = round(time.monotonic() - compare_started, 3)
    problems = [c.describe() for c in result.checks if not c.ok]
    if not result.preprocessing_matches_template:
        problems.insert(0, "preprocessing: token or loss-mask counts differ from the template")
    result.status = "mismatch" if problems else "passed"
    result.wall_s = time.monotonic() - started
    if problems:
        result.error = "the user's pipeline wrote wrong data:\n  " + "\n  ".join(problems[:8])
        raise UserPathFailed(result, result.error)
    return result


class UserPathFailed(VerifyError):
    """The user's path failed; carries what it did up to there."""

    def __init__(self, result: UserPathResult, message: str) -> None:
        super().__init__(message)
        self.result = result


def compare_files(
    model_dir: Path, data_dir: Path, layer_ids: list[int]
) -> tuple[str, list[TensorCheck]]:
    """Each data_<i>.pt's hidden states vs transformers on its input_ids, in the files' dtype
    (one check per file and layer; ``prompt`` is the file's index)."""
    import torch

    files = sorted(data_dir.glob("data_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    if not files:
        raise VerifyError(f"the user's pipeline wrote no data_<i>.pt into {data_dir}")
    samples = [torch.load(f, weights_only=True) for f in files]
    dtype = str(samples[0]["hidden_states"][0].dtype).removeprefix("torch.")
    model = load_reference_model(model_dir, dtype)
    reference = residual_stream(model, [s["input_ids"].tolist() for s in samples], layer_ids)
    checks: list[TensorCheck] = []
    for index, (sample, ref) in enumerate(zip(samples, reference, strict=True)):
        tokens = int(sample["input_ids"].numel())
        states = sample["hidden_states"]
        if len(states) != len(layer_ids):
            count = f"{len(states)} hidden-state tensors for layers {layer_ids}"
            checks.append(TensorCheck(0, index, tokens, None, None, None, None, count))
            continue
        for layer, got, want in zip(layer_ids, states, ref, strict=True):
            error, scale, tol, problem = check_tensor(got, want, dtype)
            checks.append(TensorCheck(0, index, tokens, layer, error, scale, tol, problem))
    return dtype, checks
