"""A finding names the series patch it concerns: by blame, or by the patch's Vllm-Change."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.audit import Finding, Kind
from patchwheel.audit.signatures import ProviderSide
from patchwheel.bisect.attribution import _dotted, patch_of, target_series

REPO = Path(__file__).resolve().parents[2]


def finding(symbol: str) -> Finding:
    return Finding(
        kind=Kind.MISSING_ARGUMENT,
        path="src/speculators/x.py",
        line=1,
        column=0,
        source="",
        symbol=symbol,
        detail="block_size",
        message="",
        code="call-arg",
        new=ProviderSide(symbol, exists=True),
        old=None,
    )


@pytest.mark.parametrize(
    ("change", "dotted"),
    [
        (
            "vllm/config/scheduler.py::SchedulerConfig (0.16.0)",
            "vllm.config.scheduler.SchedulerConfig",
        ),
        (
            "vllm/v1/core/sched/scheduler.py::Scheduler.__init__ (0.16.0)",
            "vllm.v1.core.sched.scheduler.Scheduler",
        ),
        ("vllm/v1/__init__.py (0.1.0)", "vllm.v1"),
        ("requirements/common.txt::transformers (0.32.0)", ""),
        ("", ""),
    ],
)
def test_vllm_change_headers_as_symbols(change: str, dotted: str) -> None:
    assert _dotted(change) == dotted


def test_the_consumer_moving_names_the_patch_whose_vllm_change_matches(tmp_path: Path) -> None:
    series = target_series(REPO / "patches", "vllm-0.16", "speculators")
    named = patch_of("consumer", tmp_path, series)
    assert named(finding("vllm.v1.core.sched.scheduler.Scheduler")) == (
        "v0.16-0002-data_generation-pass-the-scheduler-block-size-to-Sch.patch"
    )
    assert named(finding("vllm.config.scheduler.SchedulerConfig")).startswith("v0.16-0003-")  # type: ignore[union-attr]
    # vllm-0.16 does not apply the pool's Request fix (0002, for vLLM >= 0.26.0)
    assert named(finding("vllm.v1.request.Request")) is None
    assert patch_of("consumer", tmp_path, [])(finding("vllm.x")) is None
    assert target_series(REPO / "patches", "no-such-target", "speculators") == []


def test_the_provider_moving_blames_a_tree_that_is_no_vendor_tree(tmp_path: Path) -> None:
    assert patch_of("provider", tmp_path, [])(finding("vllm.x")) is None
