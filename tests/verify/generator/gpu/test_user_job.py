"""The user's job measured: training files written the offline script's way (savejob), the
disks' bandwidth (diskio), the end-to-end figures in the report, and the userjob stage's
checks of speculators' own scripts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.gpu import userjob
from patchwheel.verify.generator.gpu.throughput import end_to_end
from patchwheel.verify.gpu import options as gpu_options
from patchwheel.verify.gpu.report import GpuReport, check_schema, markdown_summary
from patchwheel.verify.payloads import diskio, savejob
from patchwheel.workspace import Workspace

LAYERS, HIDDEN = 4, 256


def generator(views_of_one_storage: bool) -> savejob.Generate:
    """Results shaped as VllmHiddenStatesGenerator.generate's: per prompt, input_ids and one
    [tokens, hidden] tensor per layer; either each prompt's own storage, or (the trap) views
    into one storage of the whole call."""

    def generate(batch: list[list[int]]) -> list[dict[str, Any]]:
        total = sum(len(p) for p in batch)
        whole = torch.randn(LAYERS, total, HIDDEN).to(torch.bfloat16)
        out, start = [], 0
        for prompt in batch:
            rows = whole[:, start : start + len(prompt)]
            states = rows if views_of_one_storage else rows.clone()
            out.append(
                {
                    "input_ids": torch.tensor(prompt),
                    "hidden_states": list(states.unbind(0)),
                    "loss_mask": None,
                }
            )
            start += len(prompt)
        return out

    return generate


def test_files_hold_exactly_each_samples_hidden_states(tmp_path: Path) -> None:
    prompts = [[5] * 64 for _ in range(20)]
    per_token = LAYERS * HIDDEN * 2
    job = {"dirs": {"ram": str(tmp_path / "files")}}
    figures = savejob.measure(
        generator(False), prompts, job, repeats=1, hidden_bytes_per_token=per_token
    )
    files = figures["files"]["ram"]
    assert files["files"] == 20
    assert 1.0 < files["bytes_vs_hidden_states"] < 1.1
    assert files["save_only"]["bytes"] == files["bytes"]
    assert figures["in_memory_batched"]["tokens_per_s"] > 0
    assert not (tmp_path / "files").exists()  # a pass's files do not outlive it
    # what one file holds: the offline script's three keys, one tensor per layer
    savejob.save_files(generator(False), prompts[:1], tmp_path / "one")
    sample = torch.load(tmp_path / "one" / "data_0.pt")
    assert sorted(sample) == ["hidden_states", "input_ids", "loss_mask"]
    assert [tuple(h.shape) for h in sample["hidden_states"]] == [(64, HIDDEN)] * LAYERS


def test_views_into_one_storage_show_as_larger_files(tmp_path: Path) -> None:
    """The trap the figure guards against: torch.save writes a view's whole storage."""
    prompts = [[5] * 64 for _ in range(16)]
    per_token = LAYERS * HIDDEN * 2
    job = {"dirs": {"ram": str(tmp_path / "files")}}
    figures = savejob.measure(
        generator(True), prompts, job, repeats=1, hidden_bytes_per_token=per_token
    )
    assert figures["files"]["ram"]["bytes_vs_hidden_states"] > 7  # batches of 8: 8 x


def test_bandwidth_and_filesystem(tmp_path: Path) -> None:
    figures = diskio.write_bandwidth(tmp_path, 8 << 20)
    assert figures["bytes"] == 8 << 20 and figures["bytes_per_s"] > 0
    assert not list(tmp_path.iterdir())  # the test file is gone
    assert figures["filesystem"]["mount"].startswith("/")
    if diskio.RAM_DISK.is_dir():
        assert diskio.filesystem_of(diskio.RAM_DISK)["type"] == "tmpfs"


def side(rate: float, user_job: dict[str, Any] | None = None) -> dict[str, Any]:
    figures: dict[str, Any] = {"tokens_per_s": rate, "startup_s": 10.0}
    if user_job:
        figures["user_job"] = user_job
    return figures


def job_figures(ram_rate: float) -> dict[str, Any]:
    files = {
        "tokens_per_s": ram_rate,
        "durable_tokens_per_s": ram_rate * 0.9,
        "bytes_per_s": ram_rate * 16384,
        "save_only": {"bytes_per_s": 3e9},
        "bytes_vs_hidden_states": 1.0012,
        "in_generate_s": 0.8,
        "drain_s": 0.1,
    }
    return {
        "batch_size": 8,
        "threads": 4,
        "in_memory_batched": {"tokens_per_s": 250_000.0},
        "files": {"ram": files, "disk": {**files, "tokens_per_s": ram_rate / 2}},
    }


def test_end_to_end_figures_and_their_goal() -> None:
    disks = {
        label: {"bytes_per_s": 5e9, "filesystem": {"type": t, "mount": m}}
        for label, t, m in (("ram", "tmpfs", "/dev/shm"), ("disk", "ext4", "/"))
    }
    sides = {
        "extraction": side(300_000.0, job_figures(150_000.0)),
        "vllm-default": side(320_000.0),
        "extraction-before": side(290_000.0, job_figures(110_000.0)),
    }
    e2e = end_to_end(sides, disks)
    assert e2e["files"]["ram"]["ratio_vs_default"] == round(150_000 / 320_000, 3)
    assert e2e["goal"] == {"min_ratio": 0.9, "ratio": 0.469, "met": False}
    assert e2e["before"]["ram"]["tokens_per_s"] == 110_000.0
    report = GpuReport(target="vllm-0.26", inputs="x")
    report.throughput = {
        "prompts": 256,
        "prompt_len": 1024,
        "model": "m",
        "sides": sides,
        "end_to_end": e2e,
    }
    data = report.to_json()
    check_schema(data)
    text = markdown_summary(data)
    assert "### The user's job: tokens -> training files" in text
    assert "| files, RAM disk (tmpfs at /dev/shm) | 150,000 | 0.469 | 2.46 | 5.00 | 3.00 |" in text
    assert "ratio 0.469 (NOT met)" in text
    assert "| before (--baseline-speculators), files, RAM disk | 110,000 |" in text


def test_committed_schema_2_reports_still_read() -> None:
    committed = Path(__file__).resolve().parents[4] / "reports" / "gpu"
    readable = [json.loads(p.read_text()) for p in committed.glob("*.json")]
    readable = [d for d in readable if d.get("schema") == 2]  # the README block's reports
    assert len(readable) >= 2
    for data in readable:
        check_schema(data)
    data = GpuReport(target="t").to_json()
    data["schema"] = 2
    with pytest.raises(VerifyError, match="extra"):
        check_schema(data)  # schema 2 has no environment, imports, user_job


def test_the_scripts_must_be_the_tags(tmp_path: Path) -> None:
    with pytest.raises(VerifyError, match=r"no data_generation_offline\.py"):
        userjob.check_scripts(tmp_path)
    for name in userjob.SCRIPTS:
        (tmp_path / name).write_text("print('not speculators')\n")
    with pytest.raises(VerifyError, match=r"sha256 .* but speculators v0\.3\.0's"):
        userjob.check_scripts(tmp_path)


def test_the_userjob_stage_needs_the_scripts(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    gpu_options.add_arguments(parser)
    workspace = Workspace.at(tmp_path)
    plain = gpu_options.options_from(parser.parse_args(["--target", "t"]), workspace)
    assert "userjob" not in plain.stages
    with pytest.raises(VerifyError, match="needs --speculators-scripts"):
        gpu_options.options_from(
            parser.parse_args(["--target", "t", "--stages", "userjob"]), workspace
        )
    with_scripts = gpu_options.options_from(
        parser.parse_args(["--target", "t", "--speculators-scripts", str(tmp_path)]), workspace
    )
    assert with_scripts.stages[-1] == "userjob"
    assert with_scripts.speculators_scripts == tmp_path.resolve()
