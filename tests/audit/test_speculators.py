"""The audit on the real thing: speculators 0.3.0 against vLLM 0.11.0, 0.16.0 and 0.32.0.

Source trees come from the package index (sdists, hash-checked and cached by
`patchwheel.upstream.sources`); nothing is installed or imported. The vLLM sdists are 10-45 MB, so
these tests are marked `network` (they run offline once the cache holds them).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchwheel.audit import AuditReport, Kind, MypyEngine, run_audit
from patchwheel.patching.apply import apply_patch
from patchwheel.patching.patches import DirTree
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree
from tests import support

pytestmark = pytest.mark.network

REPO = Path(__file__).resolve().parents[2]
GENERATOR = "src/speculators/data_generation/vllm_hidden_states_generator.py"


@pytest.fixture(scope="module")
def trees(shared_cache: Cache) -> dict[str, Path]:
    pins = ["speculators==0.3.0", "vllm==0.11.0", "vllm==0.16.0", "vllm==0.32.0"]
    pins += ["vllm==0.11.1", "vllm==0.11.2"]
    return {pin: source_tree(pin, shared_cache) for pin in pins}


def audit(
    trees: dict[str, Path], provider: str, engine: MypyEngine, consumer: Path | None = None
) -> AuditReport:
    return run_audit(
        consumer or trees["speculators==0.3.0"],
        trees[provider],
        trees["vllm==0.11.0"],
        labels=("speculators==0.3.0", provider, "vllm==0.11.0"),
        engine=engine,
    )


def drift(report: AuditReport) -> set[tuple[Kind, str, str | None]]:
    return {(f.kind, f.symbol, f.detail) for f in report.findings}


KV_CACHE_SPECS = (
    Kind.UNEXPECTED_ARGUMENT,
    "vllm.v1.core.kv_cache_utils.get_kv_cache_config_from_groups",
    "kv_cache_specs",
)
BLOCK_SIZE = (Kind.MISSING_ARGUMENT, "vllm.v1.core.sched.scheduler.Scheduler", "block_size")
IS_ENCODER_DECODER = (
    Kind.MISSING_ARGUMENT,
    "vllm.config.scheduler.SchedulerConfig",
    "is_encoder_decoder",
)
EOS_TOKEN_ID = (Kind.UNEXPECTED_ARGUMENT, "vllm.v1.request.Request", "eos_token_id")


def test_a_release_that_keeps_the_called_signatures_reports_nothing(
    trees: dict[str, Path], engine: MypyEngine
) -> None:
    """No false positives against a real, different provider: vLLM 0.11.1 → 0.11.2.

    The two releases differ (the worker and the model runner among them), but not in what
    speculators 0.3.0 calls; the audit must report no drift. (The two calls that already fail
    at 0.11.1 are blind spots, reported apart: the audit cannot judge them.)
    """
    old, new = trees["vllm==0.11.1"], trees["vllm==0.11.2"]
    changed = [
        p.relative_to(new)
        for p in new.glob("vllm/**/*.py")
        if not (old / p.relative_to(new)).is_file()
        or (old / p.relative_to(new)).read_bytes() != p.read_bytes()
    ]
    # A really different provider: its engine core (the worker, the model runner) changed.
    assert {"vllm/v1/worker/gpu_worker.py", "vllm/v1/worker/gpu_model_runner.py"} <= {
        str(p) for p in changed
    }, changed

    report = run_audit(
        trees["speculators==0.3.0"],
        new,
        old,
        labels=("speculators==0.3.0", "vllm==0.11.2", "vllm==0.11.1"),
        engine=engine,
    )

    assert report.findings == []
    assert report.exit_status == 0
    assert sorted((b.location, b.symbol) for b in report.blind_spots) == [
        (
            "src/speculators/data_generation/custom_worker.py:107",
            "vllm.model_executor.models.interfaces.SupportsEagle3.model",
        ),
        (f"{GENERATOR}:148", "vllm.v1.core.sched.scheduler.Scheduler"),
    ]
    # The engine resolved speculators' use of vLLM (pydantic configs included).
    assert report.coverage.calls >= 25 and report.coverage.imports >= 20


def test_vllm_0_16_drift_with_both_locations(trees: dict[str, Path], engine: MypyEngine) -> None:
    report = audit(trees, "vllm==0.16.0", engine)
    # The incident's failures present in the 0.16.0 release, and the one it did not report.
    assert drift(report) == {KV_CACHE_SPECS, BLOCK_SIZE, IS_ENCODER_DECODER}
    by_detail = {f.detail: f for f in report.findings}
    kv = by_detail["kv_cache_specs"]
    assert kv.location == f"{GENERATOR}:136"
    assert kv.source == "kv_cache_config = get_kv_cache_config_from_groups("
    assert kv.old is not None and kv.old.location == "vllm/v1/core/kv_cache_utils.py:1004"
    assert kv.new.location == "vllm/v1/core/kv_cache_utils.py:1069"
    assert kv.changes == ("parameter kv_cache_specs removed",)
    scheduler = by_detail["block_size"]
    assert scheduler.location == f"{GENERATOR}:148"
    assert scheduler.new.location == "vllm/v1/core/sched/scheduler.py:63"
    assert "new required parameter block_size" in scheduler.changes
    config = by_detail["is_encoder_decoder"]
    assert config.location == f"{GENERATOR}:194"
    assert config.new.location is not None
    assert config.new.location.startswith("vllm/config/scheduler.py:")
    assert "new required parameter is_encoder_decoder" in config.changes
    assert report.exit_status == 1
    # Its plugin side: no subclass of a vLLM class; the worker extension named by string and
    # four worker methods named in collective_rpc resolve at both pins; one private function.
    cov = report.coverage
    assert (cov.overrides, cov.classes, cov.named, cov.rpc) == (0, 0, 1, 4)
    assert {(u.use, u.name) for u in report.private} == {
        ("import", "_get_kv_cache_groups_uniform_spec"),
        ("call", "_get_kv_cache_groups_uniform_spec"),
    }


def test_vllm_0_32_drift(trees: dict[str, Path], engine: MypyEngine) -> None:
    report = audit(trees, "vllm==0.32.0", engine)
    assert drift(report) == {KV_CACHE_SPECS, BLOCK_SIZE, IS_ENCODER_DECODER, EOS_TOKEN_ID}
    request = next(f for f in report.findings if f.detail == "eos_token_id")
    assert request.location == f"{GENERATOR}:234"
    assert request.old is not None and request.old.location == "vllm/v1/request.py:26"
    assert request.new.location == "vllm/v1/request.py:60"


def test_the_vllm_0_16_series_audits_clean(
    trees: dict[str, Path], engine: MypyEngine, tmp_path: Path
) -> None:
    patched = tmp_path / "speculators"
    shutil.copytree(trees["speculators==0.3.0"], patched)
    for patch in support.committed_series("vllm-0.16"):
        result = apply_patch(patch, DirTree(patched))
        assert result.offsets == [], f"{patch.name} applies with offsets"
    report = audit(trees, "vllm==0.16.0", engine, consumer=patched)
    assert report.findings == []
    assert report.exit_status == 0
