"""A few optimizer steps of speculators' own EAGLE-3 trainer on the files the GPU session
extracted; loss before and after, as JSON. A standalone script for the python that holds the
wheels (torch, numpy, transformers, speculators with its requirements; not patchwheel):

    python train_draft.py --extraction DIR --verifier MODEL_DIR --work DIR --out result.json
        [--device cuda|cpu] [--epochs 4] [--lr 1e-3]

DIR is an extraction folder of the session (``request.json`` and ``hidden_states.safetensors``
as ``extract.py`` writes them: every prompt's ``input_ids`` and its hidden states per layer,
four layers, the last one the verifier's last hidden state as EAGLE-3 reads it). Each prompt
becomes one ``data_<i>.pt`` in speculators' v1 layout (``input_ids``, ``hidden_states`` per
layer, ``loss_mask``), the token counts become the draft vocabulary through speculators'
``build_vocab_mappings_from_distribution``, then the setup is speculators' ``scripts/train.py``'s
through its library: a Llama decoder-layer config from the verifier's, ``Eagle3SpeculatorConfig``,
``Eagle3DraftModel``, ``split_files``, ``Eagle3SampleFileDataset`` (uniform noise on the train
side), ``MultipackDistributedBatchSamplerV2``, ``create_collate_fn``, ``Trainer.run_training``.
Loss before and after: the draft's mean loss over every file, noise-free, in eval mode.

Exit 0 when training ran and the loss is finite and went down, 1 otherwise, 2 on bad arguments.
``--device cpu`` (FlexAttention has no backward on CPU) swaps in a dense-mask SDPA attention
evaluated from the same BlockMask; on CUDA nothing is replaced.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

CPU_ATTENTION = "patchwheel_dense_sdpa"
NOISE_STD = 0.05  # speculators' train.py


class MetricCapture(logging.Handler):
    """Keeps the dict records the trainer logs on "speculators.metrics"."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, dict):
            self.records.append({"step": getattr(record, "step", None), **record.msg})


def versions() -> dict[str, str]:
    out = {}
    for name in ("speculators", "torch", "transformers", "vllm", "pydantic"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def register_cpu_attention() -> None:
    """A dense-mask SDPA attention that accepts speculators' BlockMask (CPU backward works)."""
    import torch
    from torch.nn.attention.flex_attention import create_mask
    from transformers import AttentionInterface

    def dense_sdpa(
        module: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: Any,
        scaling: float | None = None,
        **_kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        mask = create_mask(
            attention_mask.mask_mod, 1, 1, query.shape[2], key.shape[2], device=query.device
        )
        out = torch.nn.functional.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=mask,
            scale=scaling,
            enable_gqa=query.shape[1] != key.shape[1],
        )
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(CPU_ATTENTION, dense_sdpa)


def layer_config(verifier_dir: str, num_layers: int, attention: str) -> Any:
    """The draft's decoder-layer config, from the verifier's (as train.py builds it)."""
    from transformers import AutoConfig, LlamaConfig

    verifier = AutoConfig.from_pretrained(verifier_dir)
    config = LlamaConfig(
        vocab_size=verifier.vocab_size,
        hidden_size=verifier.hidden_size,
        intermediate_size=verifier.intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=verifier.num_attention_heads,
        num_key_value_heads=verifier.num_key_value_heads,
        hidden_act=verifier.hidden_act,
        max_position_embeddings=verifier.max_position_embeddings,
        initializer_range=verifier.initializer_range,
        rms_norm_eps=verifier.rms_norm_eps,
        head_dim=getattr(verifier, "head_dim", None),
    )
    config._attn_implementation = attention
    return config


def speculator_config(args: argparse.Namespace, layers: Any, draft_vocab_size: int) -> Any:
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.eagle3 import Eagle3SpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig

    return Eagle3SpeculatorConfig(
        transformer_layer_config=layers,
        draft_vocab_size=draft_vocab_size,
        norm_before_residual=True,
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3",
            proposal_methods=[
                GreedyTokenProposalConfig(proposal_type="greedy", speculative_tokens=args.ttt_steps)
            ],
            default_proposal_method="greedy",
            verifier=VerifierConfig(
                name_or_path=str(args.verifier), architectures=["LlamaForCausalLM"]
            ),
        ),
    )


def loader(files: list[Any], total_seq_len: int, noise: bool) -> Any:
    from speculators.train.data import (
        Eagle3SampleFileDataset,
        create_collate_fn,
        standardize_data_v1,
    )
    from speculators.train.distributed_batch_sampler import (
        MultipackDistributedBatchSamplerV2,
    )
    from speculators.train.noise_transforms import AddUniformNoise
    from torch.utils.data import DataLoader

    transform = (
        AddUniformNoise(std=NOISE_STD, tensors=("hidden_states", "verifier_last_hidden_states"))
        if noise
        else None
    )
    dataset = Eagle3SampleFileDataset(
        file_list=files,
        max_len=total_seq_len,
        transform=transform,
        standardize_fn=standardize_data_v1,
    )
    sampler = MultipackDistributedBatchSamplerV2(
        batch_max_length=total_seq_len, lengths=dataset.approx_lengths, num_replicas=1, rank=0
    )
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=0,
        collate_fn=create_collate_fn(total_seq_len),
    )


def mean_loss(model: Any, data: Any, device: Any, call_kwargs: dict[str, Any]) -> float:
    """The draft's mean loss over a loader, no gradient, eval mode (train mode restored)."""
    import torch

    was_training = model.training
    model.eval()
    losses = []
    with torch.no_grad():
        for batch in data:
            moved = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
            _tokens, loss, _metrics = model(**moved, **call_kwargs)
            losses.append(float(loss.item()))
    model.train(was_training)
    if not losses:
        raise ValueError("the evaluation loader gave no batch")
    return sum(losses) / len(losses)


def prepare_files(extraction: Path, work: Path, draft_vocab_size: int, vocab_size: int) -> int:
    """data_<i>.pt per extracted prompt, and d2t.npy / t2d.npy from their token counts."""
    import numpy as np
    import torch
    from safetensors.torch import load_file
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    tensors = load_file(str(extraction / "hidden_states.safetensors"))
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    counts: Counter[int] = Counter()
    index = 0
    for key in sorted(k for k in tensors if k.endswith(".input_ids")):
        stem = key.removesuffix(".input_ids")
        ids = tensors[key].to(torch.long)
        if ids.numel() < 8:
            continue  # too short to predict anything
        layers: list[Any] = []
        while f"{stem}.layer{len(layers)}" in tensors:
            layers.append(tensors[f"{stem}.layer{len(layers)}"])
        sample = {"input_ids": ids, "hidden_states": layers, "loss_mask": torch.ones_like(ids)}
        torch.save(sample, data / f"data_{index}.pt")
        counts.update(int(t) for t in ids.tolist())
        index += 1
    d2t, t2d = build_vocab_mappings_from_distribution(
        token_freq_dict=dict(counts),
        draft_vocab_size=draft_vocab_size,
        target_vocab_size=vocab_size,
    )
    np.save(work / "d2t.npy", d2t.cpu().numpy())
    np.save(work / "t2d.npy", t2d.cpu().numpy())
    return index


def train(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.data import list_files, split_files
    from speculators.train.logger import setup_metric_logger, setup_root_logger
    from speculators.train.trainer import Trainer, TrainerConfig

    started = time.monotonic()
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device")
        device: Any = torch.device("cuda", 0)
        local_rank: Any = 0
        attention = "simple_flex_attention"  # speculators' own (speculators.models.eagle3)
    else:
        device = torch.device("cpu")
        local_rank = "cpu"
        register_cpu_attention()
        attention = CPU_ATTENTION

    from transformers import AutoConfig

    vocab_size = int(AutoConfig.from_pretrained(str(args.verifier)).vocab_size)
    num_files = prepare_files(args.extraction, args.work, args.draft_vocab_size, vocab_size)
    args.data = args.work / "data"
    args.vocab = args.work
    args.save_path = args.work / "checkpoints"
    setup_root_logger()
    setup_metric_logger(loggers="", run_name=None, output_dir=str(args.save_path / "logs"))
    capture = MetricCapture()
    logging.getLogger("speculators.metrics").addHandler(capture)

    d2t = torch.from_numpy(np.load(args.vocab / "d2t.npy")).to(device)
    t2d = torch.from_numpy(np.load(args.vocab / "t2d.npy")).to(device)
    layers = layer_config(str(args.verifier), args.draft_layers, attention)
    config = speculator_config(args, layers, int(d2t.shape[0]))
    model = Eagle3DraftModel(config=config, t2d=t2d, d2t=d2t)

    all_files = sorted(list_files(str(args.data)), key=str)
    if len(all_files) < 2:
        raise SystemExit(f"{args.data}: {len(all_files)} data files, need at least 2")
    train_files, val_files = split_files(str(args.data), ratio=0.9)
    call_kwargs = {
        "use_off_policy_tokens": False,
        "ttt_steps": args.ttt_steps,
        "ttt_step_loss_decay": 1.0,
    }
    train_loader = loader(train_files, args.total_seq_len, noise=True)
    val_loader = loader(val_files, args.total_seq_len, noise=False)
    eval_loader = loader(all_files, args.total_seq_len, noise=False)

    trainer = Trainer(
        model,
        TrainerConfig(
            lr=args.lr,
            num_epochs=args.epochs,
            save_path=str(args.save_path),
            resume_from_checkpoint=False,
            is_distributed=False,
            local_rank=local_rank,
            train_call_kwargs=call_kwargs,
            val_call_kwargs=call_kwargs,
        ),
        train_loader,
        val_loader,
    )  # moves the model to local_rank
    setup_s = time.monotonic() - started
    loss_before = mean_loss(trainer.model, eval_loader, device, call_kwargs)
    t0 = time.monotonic()
    trainer.run_training()
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.monotonic() - t0
    loss_after = mean_loss(trainer.model, eval_loader, device, call_kwargs)

    train_steps = [r for r in capture.records if "train" in r]
    val_epochs = [r for r in capture.records if "val" in r]
    last_epoch = args.save_path / str(args.epochs - 1)
    result: dict[str, Any] = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "versions": versions(),
        "attention": attention,
        "compile": not args.no_compile,
        "files": {
            "extracted": num_files,
            "train": len(train_files),
            "val": len(val_files),
            "eval": len(all_files),
        },
        "draft_parameters": sum(p.numel() for p in model.parameters()),
        "epochs": args.epochs,
        "steps": len(train_steps),
        "lr": args.lr,
        "train_loss": [round(float(r["train"]["loss"]), 6) for r in train_steps],
        "loss_before": loss_before,
        "loss_after": loss_after,
        "val": val_epochs[-1]["val"] if val_epochs else None,
        "checkpoint": sorted(p.name for p in last_epoch.iterdir()) if last_epoch.is_dir() else [],
        "seconds": {
            "setup": round(setup_s, 2),
            "train": round(train_s, 2),
            "total": round(time.monotonic() - started, 2),
        },
    }
    finite = math.isfinite(loss_before) and math.isfinite(loss_after)
    result["loss_finite"] = finite
    result["loss_decreased"] = finite and loss_after < loss_before
    result["passed"] = bool(result["loss_decreased"] and result["steps"] > 0)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extraction", type=Path, required=True, help="extraction folder")
    parser.add_argument("--verifier", type=Path, required=True, help="verifier model folder")
    parser.add_argument("--work", type=Path, required=True, help="an empty folder for the run")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ttt-steps", type=int, default=3)
    parser.add_argument("--draft-layers", type=int, default=1)
    parser.add_argument("--total-seq-len", type=int, default=2048)
    parser.add_argument("--draft-vocab-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-compile", action="store_true", help="TORCH_COMPILE_DISABLE=1")
    args = parser.parse_args(argv)
    for name in ("extraction", "verifier"):
        if not getattr(args, name).is_dir():
            parser.error(f"--{name} {getattr(args, name)}: not a folder")
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    if args.work.exists() and any(args.work.iterdir()):
        parser.error(f"--work {args.work} is not empty (the trainer would resume)")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.no_compile:
        os.environ["TORCH_COMPILE_DISABLE"] = "1"  # read when torch.compile first runs
    result = train(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
