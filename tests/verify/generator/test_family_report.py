"""A family's comparisons as the report holds them: a failing one is named per family and
oracle; README's verify block is written from the report file, refusing a hand-edited one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.family_check import family_failures, summarize
from patchwheel.verify.oracles.compare import TensorCheck
from patchwheel.verify.readme import END, START, rewrite
from patchwheel.verify.report import VerifyReport, write_report


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


def test_readme_block_is_written_from_the_report(tmp_path: Path) -> None:
    report = VerifyReport("vllm-0.32", "passed", "float32", 1e-4, [0, 1], 256)
    report.checks = _checks([1e-6, 2e-6])
    report.families = [_family("qwen3", oracle_bad=False)]
    path = tmp_path / "verify-cpu.json"
    write_report(report, path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{START}\nold\n{END}\ntail\n")
    rewrite(path, readme)
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{END}\ntail\n")
    assert "| qwen3 (`Qwen3ForCausalLM`) | 4/4, ≤ 2.0e-06 | 4/4, ≤ 5.0e-01 | 70 + 75 |" in text
    assert "Status **passed**" in text

    edited = json.loads(path.read_text())
    edited["note"] = "added by hand"
    path.write_text(json.dumps(edited))
    with pytest.raises(VerifyError, match="keys verify never writes: note"):
        rewrite(path, readme)
    write_report(report, path)
    readme.write_text("no markers\n")
    with pytest.raises(VerifyError, match="no <!-- verify-cpu --> … <!-- /verify-cpu --> block"):
        rewrite(path, readme)
