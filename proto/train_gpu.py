"""A few optimizer steps of speculators' own EAGLE-3 trainer on extracted files; loss as JSON.

    python train_gpu.py --data DIR --verifier MODEL_DIR --vocab DIR [--epochs 8] [--lr 1e-3]
        [--device cuda|cpu] [--save-path DIR] [--out result.json] [--no-compile]

DIR holds speculators' data-generation output (``data_<i>.pt``: ``input_ids``, ``hidden_states``
per layer, ``loss_mask``), MODEL_DIR the verifier (its config, embeddings and lm_head), and the
vocab DIR ``d2t.npy``/``t2d.npy`` (speculators' build_vocab_mapping output; user_pipeline.py
writes all three). The setup is speculators v0.3.0 ``scripts/train.py``'s, through its library:
a Llama decoder-layer config from the verifier's (flex attention), ``Eagle3SpeculatorConfig``,
``Eagle3DraftModel``, ``split_files``, ``Eagle3SampleFileDataset`` (uniform noise on the train
side), ``MultipackDistributedBatchSamplerV2``, ``create_collate_fn``, then ``Trainer`` and
``Trainer.run_training`` (AdamW, clipping, linear schedule, validation, a checkpoint per epoch).
Loss before and after: the mean loss of the draft over every file, noise-free, in eval mode.

It prints one JSON object (also written to ``--out``): device, versions, steps, per-step train
loss, loss before/after, validation metrics, checkpoint files, seconds. Exit 0 when training
ran and the loss went down, 1 otherwise, 2 on bad arguments.

Imports: torch, numpy, transformers and speculators (with its own requirements) only.

``--device cpu`` is for trying the script without a GPU: FlexAttention has no backward on CPU,
so there the draft's decoder layers use a dense-mask SDPA attention registered under another
name (the same mask, evaluated from the BlockMask's mask_mod), and the trainer is given
``local_rank="cpu"`` (it moves the model and batches with ``.to(local_rank)``). On CUDA nothing
is replaced: speculators' own "simple_flex_attention" and ``local_rank=0``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import sys
import time
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
        "files": {"train": len(train_files), "val": len(val_files), "eval": len(all_files)},
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
    result["loss_decreased"] = loss_after < loss_before
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of data_<i>.pt")
    parser.add_argument("--verifier", type=Path, required=True, help="verifier model folder")
    parser.add_argument("--vocab", type=Path, required=True, help="folder of d2t.npy, t2d.npy")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ttt-steps", type=int, default=3)
    parser.add_argument("--draft-layers", type=int, default=1)
    parser.add_argument("--total-seq-len", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-path", type=Path, default=Path("train-checkpoints"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-compile", action="store_true", help="TORCH_COMPILE_DISABLE=1")
    args = parser.parse_args(argv)
    for name in ("data", "verifier", "vocab"):
        if not getattr(args, name).is_dir():
            parser.error(f"--{name} {getattr(args, name)}: not a folder")
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    if args.save_path.exists() and any(args.save_path.iterdir()):
        parser.error(f"--save-path {args.save_path} is not empty (the trainer would resume)")
    if args.no_compile:
        os.environ["TORCH_COMPILE_DISABLE"] = "1"  # read when torch.compile first runs
    result = train(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if result["loss_decreased"] and result["steps"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
