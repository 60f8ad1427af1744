"""The hidden-state files of the served generation, read back and checked.

A connector writes one safetensors file per request: ``hidden_states`` ``[tokens, layers,
hidden]`` and ``token_ids`` (vLLM's ExampleHiddenStatesConnector); hs-connectors' FP8 connector
stores ``hidden_states`` as float8_e4m3fn with ``hidden_states_scales`` ``[tokens, 1, 1]``
(one scale per token), read back here as ``fp8.to(float32) * scale``, the dequantization of
hs-connectors' own ``FP8Transfer``. speculators' ``generate-offline-data`` moves each file to
``hs_<i>.safetensors``, ``i`` the row of the prepared dataset.

Two checks, both with :func:`patchwheel.verify.oracles.compare.check_tensor`:

- :func:`check_against_transformers`: each file's layer ``k`` (vLLM's id) against the
  residual stream after decoder layer ``k - 1`` computed by transformers on the file's own
  token ids (``verify.oracles.reference``), and the token ids against the dataset row.
- :func:`check_against_generator`: against the generator generation's ``data_<i>.pt`` files
  of the same model (speculators 0.3.0's user path, layer ``i`` = the stream after decoder
  layer ``i``): every sample's token ids must be one of the served rows, and each common layer
  must agree, compared in the generator files' dtype.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.oracles.compare import TensorCheck, check_tensor
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream

SCALES = "hidden_states_scales"


@dataclass(frozen=True)
class StateFile:
    """One file's contents: its row, token ids, states (float) and the stored format."""

    row: int
    path: Path
    token_ids: list[int]
    hidden_states: Any  # torch.Tensor [tokens, layers, hidden]
    stored: str  # "float32", "bfloat16", "float8_e4m3fn" …


def read_state_files(directory: Path) -> list[StateFile]:
    """Every ``hs_<i>.safetensors`` of ``directory``, by row; FP8 files dequantized."""
    import torch
    from safetensors.torch import load_file

    files = sorted(directory.glob("hs_*.safetensors"), key=lambda p: int(p.stem[3:]))
    out = []
    for path in files:
        data = load_file(str(path))
        states = data["hidden_states"]
        stored = str(states.dtype).removeprefix("torch.")
        if SCALES in data:
            states = states.to(torch.float32) * data[SCALES].to(torch.float32)
        ids = [int(i) for i in data["token_ids"].tolist()]
        out.append(StateFile(int(path.stem[3:]), path, ids, states, stored))
    return out


def _whole(row: int, tokens: int, problem: str) -> TensorCheck:
    return TensorCheck(0, row, tokens, None, None, None, None, problem)


def check_against_transformers(
    model_dir: Path,
    files: Sequence[StateFile],
    rows: Sequence[Sequence[int]],
    layer_ids: Sequence[int],
    *,
    dtype: str,
) -> list[TensorCheck]:
    """Each file vs transformers (``dtype``: the server's; FP8 files at their own tolerance).

    One check per (file, layer id); a file whose tokens are not its row's, or whose shape is
    not ``[tokens, len(layer_ids), hidden]``, is one failed check. Every row must have a file.
    """
    import torch

    # A float32 file is checked against transformers run in float64, then rounded: twice in
    # about forty runs on these machines a float32 transformers run returned the first prompt
    # of the process off by 2.7e-3 (2.8e-4 of its scale, 3x the tolerance), both times the
    # same numbers, while vLLM's file and a float64 run agreed to 2e-5.
    model = load_reference_model(model_dir, dtype)
    if dtype == "float32":
        model = model.to(torch.float64)
    by_row = {f.row: f for f in files}
    checks: list[TensorCheck] = []
    missing = [r for r in range(len(rows)) if r not in by_row]
    for row in missing:
        checks.append(_whole(row, len(rows[row]), "no hidden-state file for this dataset row"))
    for extra in sorted(set(by_row) - set(range(len(rows)))):
        checks.append(_whole(extra, 0, f"a file for row {extra}, which the dataset lacks"))
    present = [by_row[r] for r in range(len(rows)) if r in by_row]
    reference = [
        [tensor.to(torch.float32) if dtype == "float32" else tensor for tensor in layers]
        for layers in residual_stream(
            model, [f.token_ids for f in present], [k - 1 for k in layer_ids]
        )
    ]
    for file, ref in zip(present, reference, strict=True):
        tokens = len(file.token_ids)
        if file.token_ids != list(rows[file.row]):
            checks.append(_whole(file.row, tokens, "token_ids differ from the dataset row"))
            continue
        shape = tuple(file.hidden_states.shape)
        if len(shape) != 3 or shape[:2] != (tokens, len(layer_ids)):
            checks.append(
                _whole(
                    file.row,
                    tokens,
                    f"hidden_states {shape}, expected [{tokens}, {len(layer_ids)}, hidden]",
                )
            )
            continue
        quantized = file.stored == "float8_e4m3fn"
        for index, (layer, expected) in enumerate(zip(layer_ids, ref, strict=True)):
            got = file.hidden_states[:, index]
            want = expected.float() if quantized else expected
            error, scale, tol, problem = check_tensor(
                got.float() if quantized else got, want, file.stored if quantized else dtype
            )
            checks.append(TensorCheck(0, file.row, tokens, layer, error, scale, tol, problem))
    return checks


def model_digest(model_dir: Path) -> str:
    """The sha256 of a model's weights (``model.safetensors``): "the same model"."""
    path = model_dir / "model.safetensors"
    if not path.is_file():
        raise VerifyError(f"{model_dir} has no model.safetensors to compare")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_against_generator(
    files: Sequence[StateFile],
    layer_ids: Sequence[int],
    generator_data: Path,
    generator_layers: Sequence[int],
) -> tuple[list[TensorCheck], int]:
    """The generator generation's samples (``data_<i>.pt``) vs the served files: (checks, the
    number of samples compared). Layer ``i`` of a sample is vLLM's id ``i + 1``; layers only
    one side has are not compared. A sample whose token ids no served file has fails."""
    import torch

    samples = sorted(generator_data.glob("data_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    if not samples:
        raise VerifyError(f"{generator_data} holds no data_<i>.pt of the generator generation")
    common = [(layer_ids.index(i + 1), i) for i in generator_layers if i + 1 in layer_ids]
    if not common:
        raise VerifyError(
            f"no common layer: the served ids {list(layer_ids)} are the generator's layers "
            f"{[k - 1 for k in layer_ids]}, the files have {list(generator_layers)}"
        )
    served = {tuple(f.token_ids): f for f in files}
    checks: list[TensorCheck] = []
    for number, path in enumerate(samples):
        sample = torch.load(path, weights_only=True)
        ids = tuple(int(i) for i in sample["input_ids"].tolist())
        file = served.get(ids)
        if file is None:
            checks.append(
                _whole(number, len(ids), f"{path.name}: no served file has its token ids")
            )
            continue
        for served_index, generator_index in common:
            want = sample["hidden_states"][list(generator_layers).index(generator_index)]
            got = file.hidden_states[:, served_index].to(want.dtype)
            dtype = str(want.dtype).removeprefix("torch.")
            error, scale, tol, problem = check_tensor(got, want, dtype)
            checks.append(
                TensorCheck(0, number, len(ids), generator_index + 1, error, scale, tol, problem)
            )
    return checks, len(samples)
