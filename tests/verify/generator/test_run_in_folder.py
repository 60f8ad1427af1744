"""run_in_folder: a side's script copied into a fresh folder, run there, read back."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.extraction import EXTRACT_SCRIPT, run_in_folder
from tests.verify.fake_speculators import fake_site


def request(calls: list[list[list[int]]], model_dir: Path, mode: int) -> dict[str, object]:
    """Layers 0 and 3 of the stand-in generator (fake_speculators) in ``mode``."""
    return {
        "model_dir": str(model_dir),
        "layer_ids": [0, 3],
        "generator": {"mode": mode},
        "calls": calls,
    }


def test_the_script_runs_from_a_fresh_folder_and_its_rows_are_read_back(tmp_path: Path) -> None:
    site = fake_site(tmp_path)
    out = tmp_path / "extract"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run")
    calls = [[[1, 2, 3], [4]], [[5, 6]]]
    asked = request(calls, tmp_path, mode=3)
    env = {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    extraction = run_in_folder(
        sys.executable, EXTRACT_SCRIPT, asked, out, calls, env=env, timeout_s=120
    )

    assert not (out / "stale.txt").exists()
    assert (out / EXTRACT_SCRIPT.name).read_bytes() == EXTRACT_SCRIPT.read_bytes()
    assert json.loads((out / "request.json").read_text(encoding="utf-8")) == asked
    assert extraction.log.parent == out
    got = [[r.input_ids for r in call] for call in extraction.results]
    assert got == calls
    first = extraction.results[0][0]
    assert [float(t[0, 0]) for t in first.hidden_states] == [3.0, 4.0]
    assert extraction.effective["layer_ids"] == [0, 3]


def test_a_crash_is_explained_under_the_sides_label(tmp_path: Path) -> None:
    site = fake_site(tmp_path)
    calls = [[[1, 2]]]
    env = {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    with pytest.raises(VerifyError) as info:
        run_in_folder(
            sys.executable,
            EXTRACT_SCRIPT,
            request(calls, tmp_path, mode=0),
            tmp_path / "out",
            calls,
            env=env,
            timeout_s=120,
            label="tiny extraction",
        )
    message = str(info.value)
    assert message.startswith("tiny extraction failed:")
    assert "vllm.v1.request.Request.__init__" in message
