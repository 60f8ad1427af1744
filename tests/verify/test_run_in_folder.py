"""run_in_folder: a side's script copied into a fresh folder, run there, read back."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.extraction import EXTRACT_SCRIPT, run_in_folder

# A stand-in speculators whose generator returns, for every prompt, its ids and one tensor per
# layer filled with (layer + prompt length); an empty prompt raises.
GENERATOR = """\
    import torch


    class _Config:
        def __init__(self, **fields):
            self.__dict__.update(fields)


    class _Executor:
        def collective_rpc(self, method):
            return []

        def shutdown(self):
            pass


    class VllmHiddenStatesGenerator:
        def __init__(self, model_path, layer_ids=None):
            self.layer_ids = layer_ids
            self.executor = _Executor()
            self.vllm_config = _Config(
                scheduler_config=_Config(max_num_batched_tokens=256),
                parallel_config=_Config(tensor_parallel_size=1),
                model_config=_Config(dtype="float32", max_model_len=64, enforce_eager=True),
                cache_config=_Config(gpu_memory_utilization=0.1, enable_prefix_caching=False),
                compilation_config=_Config(),
                device_config=_Config(device="cpu"),
            )

        def generate(self, token_ids):
            if any(not ids for ids in token_ids):
                raise ValueError("an empty prompt")
            return [
                {
                    "input_ids": torch.tensor(ids),
                    "hidden_states": [
                        torch.full((len(ids), 2), float(k + len(ids)))
                        for k in range(len(self.layer_ids))
                    ],
                }
                for ids in token_ids
            ]
    """


def fake_site(root: Path) -> Path:
    site = root / "site"
    package = site / "speculators" / "data_generation"
    package.mkdir(parents=True)
    (site / "speculators" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "vllm_hidden_states_generator.py").write_text(textwrap.dedent(GENERATOR))
    return site


def request(calls: list[list[list[int]]], model_dir: Path) -> dict[str, object]:
    return {"model_dir": str(model_dir), "layer_ids": [0, 3], "generator": {}, "calls": calls}


def test_the_script_runs_from_a_fresh_folder_and_its_rows_are_read_back(tmp_path: Path) -> None:
    site = fake_site(tmp_path)
    out = tmp_path / "extract"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run")
    calls = [[[1, 2, 3], [4]], [[5, 6]]]
    asked = request(calls, tmp_path)
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
    calls = [[[1, 2]], [[]]]
    env = {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    with pytest.raises(VerifyError) as info:
        run_in_folder(
            sys.executable,
            EXTRACT_SCRIPT,
            request(calls, tmp_path),
            tmp_path / "out",
            calls,
            env=env,
            timeout_s=120,
            label="tiny extraction",
        )
    message = str(info.value)
    assert message.startswith("tiny extraction failed:")
    assert "an empty prompt" in message
