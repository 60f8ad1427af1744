"""The GPU session of a served target, the parts that run without a GPU: the session chooses
the served path from the build's manifest, its plans per stage, its wheels, and its refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.gpu import report
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.served.gpu.session import (
    _loss,
    gpu_plan,
    is_served,
    learned,
    served_wheels,
    throughput_plan,
)
from tests import support
from tests.verify.gpu.test_gpu import write_manifest


@pytest.fixture
def served_build(tmp_path: Path) -> tuple[Path, Path]:
    """A served target's build dir (manifest: generation "served") and its wheelhouse."""
    house = tmp_path / "wheelhouse"
    wheels = [
        support.make_wheel(house, "speculators", "0.9.0+pw1", {"speculators/__init__.py": b""}),
        support.make_wheel(house, "hs_connectors", "0.9.0+pw2", {"hs_connectors/x.py": b""}),
        support.make_wheel(house, "vllm", "0.26.0", {"vllm/__init__.py": b""}),
    ]
    target = tmp_path / "build" / "spec-0.9-vllm-0.26"
    write_manifest(target, wheels)
    data = json.loads((target / "manifest.json").read_text())
    data["generation"] = "served"
    (target / "manifest.json").write_text(json.dumps(data))
    return target, house


def options(target: Path, **kwargs: object) -> GpuOptions:
    return GpuOptions(manifest_dir=target, work_dir=target / "w", report_path=target / "r.json",
                      **kwargs)  # type: ignore[arg-type]  # fmt: skip


def test_the_manifest_chooses_the_path(served_build: tuple[Path, Path], tmp_path: Path) -> None:
    target, _house = served_build
    assert is_served(target) is True
    plain = tmp_path / "plain"
    write_manifest(plain, [])
    assert is_served(plain) is False  # no generation recorded: the generator's session
    assert is_served(tmp_path / "nothing-built") is False  # that session says what is missing


def test_the_served_wheels_include_hs_connectors(served_build: tuple[Path, Path]) -> None:
    target, house = served_build
    found = served_wheels(options(target, wheelhouse=house))
    assert [w.distribution for w in found] == ["speculators", "hs-connectors", "vllm"]
    (house / found[1].filename).write_bytes(b"tampered")
    with pytest.raises(VerifyError, match="sha256"):
        served_wheels(options(target, wheelhouse=house))


def test_each_stage_has_its_plan(served_build: tuple[Path, Path]) -> None:
    target, _house = served_build
    correctness = gpu_plan(options(target, tp=2), "qwen3_moe", "correctness")
    assert correctness.family == "qwen3_moe" and correctness.train_steps == 0
    assert [c.name for c in correctness.connectors] == ["example", "fp8"]
    assert not any(c.enforce_eager for c in correctness.connectors)  # vLLM's GPU default
    assert correctness.serve_args == (
        "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.35",
    )  # fmt: skip
    assert correctness.loss_implementation == "eager"  # the draft forward runs on the CPU
    training = gpu_plan(options(target, train_epochs=4), "llama", "training")
    assert training.train_steps == 12 and training.loss_implementation is None  # fused
    assert [c.name for c in training.connectors] == ["example"]
    assert "--max-steps" in training.train_args("/m", "/d", "/s", "/o")
    eager = gpu_plan(options(target, extraction_eager=True), "llama", "correctness")
    assert all(c.enforce_eager for c in eager.connectors)


def test_a_trainer_steps_loss() -> None:
    assert _loss({"loss": 2.5}) == 2.5
    assert _loss({"loss_sum": 6.0, "loss_total": 3.0}) == 2.0
    assert _loss({"loss_sum": 6.0, "loss_total": 0.0}) is None


def test_a_served_target_refuses_without_a_gpu(
    tmp_path: Path, served_build: tuple[Path, Path]
) -> None:
    target, house = served_build
    proc = subprocess.run(
        [sys.executable, "-m", "patchwheel", "--root", str(tmp_path), "gpu",
         "--target", target.name, "--wheelhouse", str(house)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "no CUDA GPU is visible" in proc.stderr and "Traceback" not in proc.stderr
    assert not (target / report.REPORT_NAME).exists()


def test_training_is_judged_on_the_same_batches_seen_again() -> None:
    # Three passes over four batches: the last pass's mean below the first's.
    assert learned([4.0, 4.2, 3.9, 4.1, 3.5, 3.6, 3.4, 3.5, 3.0, 3.1, 2.9, 3.0], 12) is None
    # The 2026-12-04 H200 run: one pass of 4 of 12 planned steps; one batch against another.
    run = [3.8704, 4.1247, 3.6900, 3.8996]
    assert learned(run, 12) == "4 of 12 planned steps logged a loss (3 or more needed)"
    flat = [4.0, 4.2, 3.9, 4.1, 4.0, 4.1, 4.2, 4.3, 4.1, 4.2, 4.0, 4.3]
    assert "not below the first third's" in str(learned(flat, 12))
    assert "not finite" in str(learned([4.0, float("nan"), 3.0], 3))


def test_training_runs_its_planned_steps(served_build: tuple[Path, Path]) -> None:
    target, _house = served_build
    training = gpu_plan(options(target, train_epochs=4), "llama", "training")
    args = training.train_args("/m", "/d", "/s", "/o")
    assert args[args.index("--max-steps") + 1] == "12"
    assert int(args[args.index("--epochs") + 1]) >= 12  # one step per epoch is the least


def test_the_served_throughput_runs_with_the_prefill_sides_token_budget(
    served_build: tuple[Path, Path],
) -> None:
    target, _house = served_build
    opts = options(target)
    plan = throughput_plan(opts)
    args = list(plan.serve_args)
    assert args[args.index("--max-num-batched-tokens") + 1] == str(opts.max_num_batched_tokens)
    assert plan.concurrency == opts.prompts and plan.max_model_len == opts.prompt_len + 8
