"""A requested setting the generator ignores fails the run; a report is only what code writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.gpu.correctness import requested_settings
from patchwheel.verify.generator.plan import VerifyPlan
from patchwheel.verify.payloads.extract import SettingNotApplied, _generator_kwargs, check_applied
from patchwheel.verify.report import REPORT_KEYS, VerifyReport, read_report, write_report


class GeneratorWithoutStepBudget:
    """speculators 0.3.0's signature: no max_num_batched_tokens, no dtype."""

    def __init__(
        self,
        model_path: str,
        layer_ids: list[int] | None = None,
        max_model_len: int = 2048,
        gpu_memory_utilization: float = 0.8,
        tensor_parallel_size: int = 1,
    ) -> None:
        self.model_path = model_path


def _effective(**changes: object) -> dict[str, object]:
    plan = VerifyPlan()
    engine: dict[str, object] = {
        "layer_ids": list(plan.layer_ids),
        "step_budget": plan.max_num_batched_tokens,
        "workers": 1,
        "dtype": plan.dtype,
        "max_model_len": plan.max_model_len,
        "gpu_memory_utilization": plan.gpu_memory_utilization,
    }
    engine.update(changes)
    return engine


def test_a_setting_the_generator_does_not_accept_is_refused_by_name() -> None:
    wanted = VerifyPlan().generator_kwargs()
    with pytest.raises(SettingNotApplied) as caught:
        _generator_kwargs(GeneratorWithoutStepBudget, wanted)
    message = str(caught.value)
    assert "GeneratorWithoutStepBudget does not accept" in message
    assert "dtype='float32'" in message and "max_num_batched_tokens=256" in message


def test_accepted_settings_pass_through_unchanged() -> None:
    wanted = {"max_model_len": 512, "tensor_parallel_size": 1}
    assert _generator_kwargs(GeneratorWithoutStepBudget, wanted) == wanted


def test_settings_the_engine_runs_with_pass() -> None:
    plan = VerifyPlan()
    check_applied(plan.generator_kwargs(), list(plan.layer_ids), _effective())


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        (
            {"step_budget": 8192},
            "max_num_batched_tokens=256 (the engine runs with step_budget=8192)",
        ),
        ({"workers": 2}, "tensor_parallel_size=1 (the engine runs with workers=2)"),
        ({"dtype": "bfloat16"}, "dtype='float32' (the engine runs with dtype='bfloat16')"),
        ({"layer_ids": [2, 3, 3, 5]}, "layer_ids=[0, 2, 4, 5] (the generator uses [2, 3, 3, 5])"),
    ],
)
def test_a_setting_accepted_but_not_applied_fails_naming_it(
    changed: dict[str, object], named: str
) -> None:
    plan = VerifyPlan()
    with pytest.raises(SettingNotApplied, match="accepted but did not apply") as caught:
        check_applied(plan.generator_kwargs(), list(plan.layer_ids), _effective(**changed))
    assert named in str(caught.value)


def _written(tmp_path: Path) -> Path:
    report = VerifyReport("vllm-0.32", "passed", "float32", 1e-4, [0, 2], 256)
    report.settings = {"extraction": {"requested": {"dtype": "float32"}, "effective": {}}}
    path = tmp_path / "verify-cpu.json"
    write_report(report, path)
    return path


def test_a_report_as_written_reads_back(tmp_path: Path) -> None:
    data = read_report(_written(tmp_path))
    assert set(data) == REPORT_KEYS
    assert data["settings"]["extraction"]["requested"] == {"dtype": "float32"}


def test_a_block_added_by_hand_makes_it_no_report(tmp_path: Path) -> None:
    path = _written(tmp_path)
    data = json.loads(path.read_text())
    data["gpu_results"] = {"passed": True}
    path.write_text(json.dumps(data))
    with pytest.raises(VerifyError, match="keys verify never writes: gpu_results"):
        read_report(path)


def test_a_missing_key_or_no_json_is_no_report(tmp_path: Path) -> None:
    path = _written(tmp_path)
    data = json.loads(path.read_text())
    del data["checks"]
    path.write_text(json.dumps(data))
    with pytest.raises(VerifyError, match="missing: checks"):
        read_report(path)
    path.write_text("{not json")
    with pytest.raises(VerifyError, match="not a readable verify report"):
        read_report(path)


def test_the_vllm_oracle_is_asked_for_the_generators_settings_on_cpu_and_gpu() -> None:
    plan = VerifyPlan(dtype="bfloat16", max_num_batched_tokens=512, max_model_len=4096)
    asked = {
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "max_num_batched_tokens": 512,
        "max_num_seqs": 32,
        "gpu_memory_utilization": 0.3,
    }
    assert list(plan.oracle_settings().items()) == list(asked.items())
    on_gpu = requested_settings(plan, tp=2)
    assert list(on_gpu.items()) == [*asked.items(), ("tensor_parallel_size", 2)]
