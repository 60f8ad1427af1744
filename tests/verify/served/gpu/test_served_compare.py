"""The served throughput takes its prefill reference from the generator target's report only
when that report measured the same thing on the same machine and vLLM wheel."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from patchwheel.verify.generator.gpu.throughput import BENCH_SPEC
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.gpu.served_summary import judge
from patchwheel.verify.served.gpu.compare import BENCH_MODEL, generator_figures

SETTINGS = {"dtype": "bfloat16", "max_model_len": 1032, "enforce_eager": False}
GPU = {"name": "NVIDIA H200", "count": 1}


def _served_report() -> dict[str, Any]:
    return {
        "machine": {"gpu": dict(GPU)},
        "packages": [{"distribution": "vllm", "sha256": "a" * 64}],
    }


def _generator_report() -> dict[str, Any]:
    return {
        "target": "vllm-0.26",
        "inputs": "abc",
        "dtype": "bfloat16",
        "machine": {"gpu": dict(GPU)},
        "packages": [{"distribution": "vllm", "sha256": "a" * 64}],
        "throughput": {
            "model": BENCH_MODEL,
            "prompts": 256,
            "prompt_len": 1024,
            "layer_ids": [2, 8, 13, 15],
            "sides": {
                "extraction": {"tokens_per_s": 300000.0, "startup_s": 100.0},
                "vllm-default": {
                    "tokens_per_s": 320000.0,
                    "startup_s": 85.0,
                    "requested_settings": dict(SETTINGS),
                },
            },
            "end_to_end": {"files": {"ram": {"tokens_per_s": 250000.0}}},
        },
    }


def _options(tmp_path: Path, report: dict[str, Any] | None) -> GpuOptions:
    path = None
    if report is not None:
        path = tmp_path / "generator.json"
        path.write_text(json.dumps(report), "utf-8")
    return GpuOptions(
        manifest_dir=tmp_path, work_dir=tmp_path, report_path=tmp_path / "r.json",
        generator_report=path,
    )  # fmt: skip


def test_same_machine_wheel_and_benchmark_reuse_the_prefill(tmp_path: Path) -> None:
    got = generator_figures(_options(tmp_path, _generator_report()), _served_report(), SETTINGS)
    assert got is not None and "refused" not in got
    assert got["llm_generate_prefill"]["tokens_per_s"] == 320000.0
    assert "generator.json" in got["llm_generate_prefill"]["measured"]
    assert got["generator"]["extraction_in_memory_tokens_per_s"] == 300000.0
    assert got["generator"]["user_job_tokens_per_s"] == {"ram": 250000.0}
    assert BENCH_SPEC.num_layers == 16  # the model BENCH_MODEL names


def test_without_the_option_nothing_is_reused(tmp_path: Path) -> None:
    assert generator_figures(_options(tmp_path, None), _served_report(), SETTINGS) is None


def _break_settings(r: dict[str, Any]) -> None:
    r["throughput"]["sides"]["vllm-default"]["requested_settings"]["enforce_eager"] = True


def _break_wheel(r: dict[str, Any]) -> None:
    r["packages"][0]["sha256"] = "b" * 64


def _break_gpu(r: dict[str, Any]) -> None:
    r["machine"]["gpu"]["name"] = "NVIDIA H100"


def _break_prompts(r: dict[str, Any]) -> None:
    r["throughput"]["prompts"] = 128


def _break_side(r: dict[str, Any]) -> None:
    del r["throughput"]["sides"]["vllm-default"]


def _break_model(r: dict[str, Any]) -> None:
    r["throughput"]["model"] = "/models/llama"


@pytest.mark.parametrize(
    ("breaker", "reason"),
    [
        (_break_settings, "prefill settings"),
        (_break_wheel, "another vLLM wheel"),
        (_break_gpu, "another GPU"),
        (_break_prompts, "prompts, length, dtype"),
        (_break_side, "no vllm-default side"),
        (_break_model, "another model"),
    ],
)
def test_anything_else_is_refused_by_name(tmp_path: Path, breaker: Any, reason: str) -> None:
    report = copy.deepcopy(_generator_report())
    breaker(report)
    got = generator_figures(_options(tmp_path, report), _served_report(), SETTINGS)
    assert got is not None and "llm_generate_prefill" not in got
    assert any(reason in r for r in got["refused"]), got


def test_an_unreadable_report_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "generator.json"
    path.write_text("{", "utf-8")
    options = GpuOptions(
        manifest_dir=tmp_path, work_dir=tmp_path, report_path=tmp_path / "r.json",
        generator_report=path,
    )  # fmt: skip
    got = generator_figures(options, _served_report(), SETTINGS)
    assert got is not None and "unreadable" in got["refused"][0]


def _stages(**kw: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "families": {"llama": {"status": "passed"}},
        "training": {"passed": True},
        "throughput": {"tokens_to_files": {}},
    }
    report.update(kw)
    return report


def test_the_served_status_is_judged_on_everything_the_report_holds() -> None:
    assert judge(_stages(), []) == "passed"
    assert judge(_stages(), ["throughput: boom"]) == "failed"
    # A family or the training failed in an earlier call, kept in the report: still failed.
    assert judge(_stages(families={"llama": {"status": "failed"}}), []) == "failed"
    assert judge(_stages(training={"served": {}, "passed": False}), []) == "failed"
    assert judge(_stages(training={"status": "failed", "error": "x"}), []) == "failed"
    # Stopped at the call's limit (the 2026-12-03 run said "passed" here): never passed.
    assert judge(_stages(), [], interrupted=True) == "interrupted"
    assert judge(_stages(training=None), []) == "incomplete"
    assert judge(_stages(families={}), []) == "incomplete"
