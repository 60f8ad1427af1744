"""A family's comparisons as the report holds them: a failing one is named per family and
oracle (the results page made from the report: tests/results/test_pages.py)."""

from __future__ import annotations

from typing import Any

from patchwheel.verify.generator.family_check import family_failures, summarize
from patchwheel.verify.oracles.compare import TensorCheck


def _checks(errors: list[float], bad: int | None = None) -> list[TensorCheck]:
    return [
        TensorCheck(0, p, 10, layer, e, 1.0, 1e-4, "max abs error too large" if p == bad else None)
        for p, e in enumerate(errors)
        for layer in (0, 1)
    ]


def _family(name: str, *, oracle_bad: bool) -> dict[str, Any]:
    good = summarize(_checks([1e-6, 2e-6]))
    return {
        "family": name,
        "passed": not oracle_bad,
        "architecture": "Qwen3ForCausalLM",
        "extraction_vs_transformers": good,
        "extraction_vs_vllm_oracle": summarize(_checks([1e-6, 0.5], bad=1 if oracle_bad else None)),
        "vllm_oracle_vs_transformers": good,
        "seconds": {"extraction": 70.0, "vllm_oracle": 75.0},
    }


def test_summary_counts_and_worst_error_per_layer() -> None:
    summary = summarize(_checks([1e-6, 3e-6], bad=1))
    assert summary["passed"] is False and summary["checks"] == 4 and summary["failed_count"] == 2
    assert summary["max_abs_error_per_layer"] == {"0": 3e-6, "1": 3e-6}
    assert summary["failed"][0].startswith("layer 0, call 0 prompt 1 (10 tokens):")


def test_a_failing_oracle_comparison_is_named_with_its_family() -> None:
    assert family_failures([_family("qwen3", oracle_bad=False)]) is None
    message = family_failures(
        [_family("llama", oracle_bad=False), _family("qwen3", oracle_bad=True)]
    )
    assert message is not None
    assert "qwen3 extraction vs vllm oracle: 2 of 4 checks failed" in message
    assert "llama" not in message and "vs transformers" not in message
