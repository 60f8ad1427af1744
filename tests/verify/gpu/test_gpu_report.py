"""The GPU session's report, options, comparisons and start-up timing, without a GPU."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.gpu import correctness, throughput
from patchwheel.verify.generator.plan import VerifyPlan
from patchwheel.verify.gpu import options, report
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.report import GpuReport, check_schema, markdown_summary
from patchwheel.verify.models.families import FAMILIES, FamilySpec
from patchwheel.verify.oracles.compare import Extracted, compare_all
from patchwheel.verify.payloads import speed
from patchwheel.workspace import Workspace

PACKAGES = [
    {
        "distribution": "speculators",
        "version": "0.3.0+pw1",
        "filename": "s.whl",
        "sha256": "ab" * 32,
        "files_checked": 3,
    }
]


def family_record(name: str, passed: bool = True) -> dict[str, Any]:
    summary = {
        "passed": passed,
        "checks": 40,
        "failures": 0 if passed else 2,
        "max_abs_error_per_layer": {"0": 0.01, "3": 0.05},
        "worst_error_over_tolerance": 0.4,
        "first_failures": [],
    }
    side = {
        "effective_settings": {
            "max_num_batched_tokens": 256,
            "compilation_mode": "VLLM_COMPILE",
            "cudagraph_mode": "FULL_AND_PIECEWISE",
            "enforce_eager": False,
        },
        "workers": [{"attention": ["FlashAttentionImpl"]}],
    }
    return {
        "family": name,
        "tensor_parallel_size": 1,
        "passed": passed,
        "model": {},
        "layers": [0, 1, 2, 3],
        "calls": [[480]],
        "requested_settings": {},
        "extraction": side,
        "vllm_oracle": side,
        "extraction_vs_vllm_oracle": {**summary, "bitwise_identical": 38, "tensors": 40},
        "extraction_vs_transformers": {**summary, "role": "required"},
        "vllm_oracle_vs_transformers": summary,
    }


def full_report() -> GpuReport:
    r = GpuReport(
        target="vllm-0.26",
        inputs="abc",
        packages=PACKAGES,
        rtol=0.125,
        machine={
            "gpu": {"count": 1, "name": "NVIDIA H200", "sm": "sm_90"},
            "versions": {"torch": "2.11.0", "vllm": "0.26.0"},
        },
        runs=[{"started": "t", "stages": ["correctness"]}],
    )
    r.families = [family_record(f) for f in FAMILIES]
    return r


def test_status_and_schema_of_a_report() -> None:
    r = full_report()
    assert r.status == "incomplete"  # no training, no throughput yet
    r.training = {"passed": True}
    r.throughput = {"sides": {}}
    assert r.status == "passed"
    r.families.pop()
    assert r.status == "incomplete"
    check_schema(r.to_json())
    r.families[1] = family_record("qwen3", passed=False)
    assert r.status == "failed"
    r = full_report()
    r.training = {"passed": False, "loss_before": 1.0, "loss_after": 2.0}
    assert r.status == "failed"
    assert GpuReport(target="t").status == "incomplete"
    data = full_report().to_json()
    data["passed"] = True  # a field the code does not write
    with pytest.raises(VerifyError, match=r"extra \['passed'\]"):
        check_schema(data)
    data = full_report().to_json()
    data["families"][0]["note"] = "added by hand"
    with pytest.raises(VerifyError, match=r"families\[0\]: extra \['note'\]"):
        check_schema(data)


def test_a_later_call_keeps_the_other_stages_of_the_same_build_only(tmp_path: Path) -> None:
    path = tmp_path / report.REPORT_NAME
    first = full_report()
    first.training = {"passed": True, "steps": 12, "loss_before": 10.0, "loss_after": 8.0}
    report.write_report(first, path, time.monotonic())
    second = GpuReport(
        target="vllm-0.26",
        inputs="abc",
        packages=PACKAGES,
        runs=[{"started": "u", "stages": ["throughput"]}],
    )
    second.throughput = {"sides": {}}
    second.keep_from(path, ("throughput",))
    assert len(second.families) == 4 and second.training["steps"] == 12
    assert [r["started"] for r in second.runs] == ["t", "u"]
    # Another build (inputs) or other wheels: nothing is kept.
    other = GpuReport(target="vllm-0.26", inputs="xyz", packages=PACKAGES)
    other.keep_from(path, ("throughput",))
    assert other.families == [] and other.training == {}
    rebuilt = GpuReport(
        target="vllm-0.26", inputs="abc", packages=[{**PACKAGES[0], "sha256": "cd" * 32}]
    )
    rebuilt.keep_from(path, ("throughput",))
    assert rebuilt.families == []
    # The stage this call runs is never taken from the old report.
    again = GpuReport(target="vllm-0.26", inputs="abc", packages=PACKAGES)
    again.keep_from(path, ("correctness",), ("qwen3", "deepseek_v3"))
    assert [f["family"] for f in again.families] == ["llama", "qwen3_moe"]
    assert again.training["steps"] == 12


def test_summary_shows_families_training_throughput_and_the_goal(tmp_path: Path) -> None:
    r = full_report()
    r.training = {
        "passed": True,
        "steps": 12,
        "loss_before": 10.5,
        "loss_after": 8.25,
        "device_name": "NVIDIA H200",
    }
    eff = {
        "enforce_eager": False,
        "compilation_mode": "VLLM_COMPILE",
        "prefix_caching": False,
        "cudagraph_mode": "FULL",
        "max_num_batched_tokens": 16384,
    }
    r.throughput = {
        "prompts": 256,
        "prompt_len": 1024,
        "model": "random Llama",
        "startup_definition": "cold",
        "sides": {
            "extraction": {
                "tokens_per_s": 320000.0,
                "startup_s": 30.0,
                "effective_settings": eff,
                "startup_phases_s": {"import": 5.0, "engine": 20.0},
                "profile": {"pass_s": 0.9, "categories_s": {"rpc_wait": 0.5}},
            },
            "vllm-default": {
                "tokens_per_s": 330000.0,
                "startup_s": 35.0,
                "effective_settings": eff,
            },
        },
        "goal": {"min_ratio": 0.95, "ratio": 0.97, "met": True},
    }
    path = tmp_path / report.REPORT_NAME
    report.write_report(r, path, time.monotonic())
    text = (tmp_path / report.SUMMARY_NAME).read_text()
    assert text == markdown_summary(json.loads(path.read_text()))
    assert "| deepseek_v3 | 1 | 0: 0.01, 3: 0.05 (0 failed) | 38/40 |" in text
    assert "loss 10.5 -> 8.25 (decreased)" in text
    assert "| extraction | 320,000 | 0.970 | 30.0 |" in text
    assert "ratio 0.97 (met)" in text
    assert "| extraction | 0.90 | import 5.0, engine 20.0 | 0.00 | 0.50 |" in text
    assert "s.whl | sha256 `" + "ab" * 32 in text


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    return parser.parse_args(["--target", "vllm-0.26", *argv])


def test_options_refuse_bad_lists_and_wheels(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    chosen = options.options_from(
        parse("--families", "qwen3_moe,llama", "--stages", "throughput"), ws
    )
    assert chosen.families == ("qwen3_moe", "llama") and chosen.stages == ("throughput",)
    assert options.options_from(parse(), ws).families == FAMILIES
    for argv, message in [
        (("--families", "gpt2"), "unknown gpt2"),
        (("--stages", "speed"), "--stages 'speed': unknown speed"),
        (("--baselines", "fast"), "--baselines 'fast'"),
        (("--tp", "0"), "--tp 0: must be at least 1"),
        (("--baseline-speculators", str(tmp_path / "missing.whl")), "not a speculators wheel"),
    ]:
        with pytest.raises(VerifyError, match=message):
            options.options_from(parse(*argv), ws)


def rows(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, 8, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def test_comparisons_catch_shifted_rows_and_count_bitwise_equality() -> None:
    plan = VerifyPlan(
        dtype="bfloat16", layer_ids=(0, 1), calls=((3,),), spec=FamilySpec("llama").tokenizer_spec
    )
    calls = [[[1, 5, 6, 7]]]
    reference = [[[rows(4, 1), rows(4, 2)]]]
    same = [[Extracted(input_ids=[1, 5, 6, 7], hidden_states=[t.clone() for t in reference[0][0]])]]
    shifted = [
        [
            Extracted(
                input_ids=[1, 5, 6, 7], hidden_states=[torch.roll(t, 1, 0) for t in reference[0][0]]
            )
        ]
    ]
    good = correctness.summary(compare_all(plan, calls, same, reference))
    bad = correctness.summary(compare_all(plan, calls, shifted, reference))
    assert good["passed"] and good["max_abs_error_per_layer"] == {"0": 0.0, "1": 0.0}
    assert not bad["passed"] and bad["failures"] == 2 and bad["first_failures"]
    assert correctness.identical(same, same) == {
        "bitwise_identical": 2,
        "tensors": 2,
    }
    assert correctness.identical(shifted, same)["bitwise_identical"] == 0


def test_settings_an_engine_did_not_honour_are_named() -> None:
    asked = {
        "max_num_batched_tokens": 256,
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
        "enforce_eager": False,
    }
    got = {
        "max_num_batched_tokens": 2048,
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
        "enforce_eager": True,
    }
    assert correctness.settings_not_honoured(asked, got) == {
        "max_num_batched_tokens": [256, 2048],
        "enforce_eager": [False, True],
    }
    assert correctness.settings_not_honoured(asked, asked) == {}


def test_start_up_counts_from_the_parents_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(speed.LAUNCH_ENV, "100.5")
    assert speed.launched_at() == 100.5
    monkeypatch.setenv(speed.LAUNCH_ENV, "not a time")
    assert speed.launched_at() == speed.STARTED_AT


def test_profile_pass_summarises_the_driver_time() -> None:
    def step(batch: list[list[int]]) -> None:
        def collective_rpc() -> None:
            time.sleep(0.05)

        collective_rpc()

    profile = speed.profile_pass(step, [[1]])
    assert profile["pass_s"] >= 0.05
    assert profile["categories_s"]["rpc_wait"] >= 0.04


def test_profile_names_of_c_methods_are_plain() -> None:
    assert speed._plain_name("<method 'copy_' of 'torch._C.TensorBase' objects>") == "copy_"
    assert speed._plain_name("<built-in method torch.cuda.synchronize>") == "synchronize"
    assert speed._plain_name("<built-in method synchronize>") == "synchronize"
    assert speed._plain_name("collective_rpc") == "collective_rpc"


def test_each_timed_side_starts_with_empty_compilation_caches_of_its_own(tmp_path: Path) -> None:
    """A side timed after another must not find its kernels compiled already (vLLM's, inductor's
    and Triton's caches): every side's process gets empty cache folders of its own."""
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'exec {sys.executable} -c "import json, os, sys; '
        "json.dump({k: os.environ.get(k) for k in sys.argv[1:4]}, open(sys.argv[-1], 'w'))\" "
        'VLLM_CACHE_ROOT TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR "$@"\n'
    )
    python.chmod(0o755)
    runtime = Runtime(python=str(python), env={"TRITON_CACHE_DIR": "/shared"}, site=tmp_path)
    opts = options.options_from(parse("--work-dir", str(tmp_path / "w")), Workspace.at(tmp_path))
    seen = [throughput._side(opts, runtime, "vllm", {}, name) for name in ("a", "b")]
    for name, env in zip(("a", "b"), seen, strict=True):
        assert set(env) == set(throughput.CACHE_VARIABLES)
        for value in env.values():
            assert value is not None and f"{name}.caches" in value
            assert not Path(value).exists()  # empty: made by the side itself when it compiles
    assert seen[0] != seen[1]
