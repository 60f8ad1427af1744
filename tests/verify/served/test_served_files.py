"""The served generation's plan, command and file checks, on a real tiny model.

Files are written the way the connectors write them (safetensors, ``hidden_states`` [tokens,
layers, hidden] and ``token_ids``; FP8 with per-token scales as hs-connectors quantizes), from
transformers' own residual stream; the checks must pass honest files and fail the known ways a
capture path goes wrong: vLLM's layer ids read as decoder layers, another row's states, a
missing file, tokens that are not the row's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from patchwheel.errors import VerifyError
from patchwheel.verify.models.chat import CONVERSATIONS, expected_samples, expected_turn_rows
from patchwheel.verify.models.tiny import TinyLlamaSpec, make_tiny_llama
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream
from patchwheel.verify.served.files import (
    check_against_generator,
    check_against_transformers,
    read_state_files,
)
from patchwheel.verify.served.launch import (
    VenvServing,
    kv_transfer_config,
    serve_argv,
    speculative_config,
    vllm_args,
)
from patchwheel.verify.served.plan import ConnectorRun, ServedPlan

SPEC = TinyLlamaSpec(num_layers=4, hidden_size=64, intermediate_size=128, vocab_size=128)
PLAN = ServedPlan(spec=SPEC, target_layer_ids=(1, 2))  # served ids [1, 2, 4]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(SPEC, tmp_path_factory.mktemp("served") / "model")


@pytest.fixture(scope="module")
def rows() -> list[list[int]]:
    gen = torch.Generator().manual_seed(3)
    return [[1, *torch.randint(3, 128, (n,), generator=gen).tolist()] for n in (9, 30, 17)]


@pytest.fixture(scope="module")
def streams(model_dir: Path, rows: list[list[int]]) -> list[list[torch.Tensor]]:
    """Per row, the stream after every decoder layer (index i: after layer i)."""
    model = load_reference_model(model_dir, "float32")
    return residual_stream(model, rows, list(range(SPEC.num_layers)))


def write_files(
    out: Path, rows: list[list[int]], states: list[torch.Tensor], *, fp8: bool = False
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for i, (ids, hidden) in enumerate(zip(rows, states, strict=True)):
        tensors = {"token_ids": torch.tensor(ids), "hidden_states": hidden.contiguous()}
        if fp8:  # hs-connectors' per-token scaling (fp8_utils.quantize_tensor_to_fp8)
            amax = hidden.abs().amax(dim=(1, 2), keepdim=True)
            scale = (amax / torch.finfo(torch.float8_e4m3fn).max).clamp(min=1e-12)
            tensors["hidden_states"] = (hidden / scale).to(torch.float8_e4m3fn)
            tensors["hidden_states_scales"] = scale
        save_file(tensors, str(out / f"hs_{i}.safetensors"))
    return out


def served(streams: list[list[torch.Tensor]], ids: list[int]) -> list[torch.Tensor]:
    """What a connector writes for vLLM layer ids ``ids``: id k is after decoder layer k - 1."""
    return [torch.stack([s[k - 1] for k in ids], dim=1) for s in streams]


def failed(checks: Any) -> list[str]:
    return [c.describe() for c in checks if not c.ok]


def test_honest_files_pass_plain_and_fp8(
    tmp_path: Path, model_dir: Path, rows: list[list[int]], streams: Any
) -> None:
    ids = PLAN.served_layer_ids
    assert ids == [1, 2, 4] and PLAN.decoder_layers == [0, 1, 3]
    for fp8 in (False, True):
        out = write_files(tmp_path / str(fp8), rows, served(streams, ids), fp8=fp8)
        files = read_state_files(out)
        assert [f.stored for f in files] == ["float8_e4m3fn" if fp8 else "float32"] * 3
        checks = check_against_transformers(model_dir, files, rows, ids, dtype="float32")
        assert len(checks) == 3 * len(ids) and failed(checks) == []


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("ids read as decoder layers", "max abs error"),
        ("another row's states", "token_ids differ"),
        ("a row without its file", "no hidden-state file"),
        ("one layer too few", "expected [10, 3, hidden]"),
    ],
)
def test_wrong_files_fail(
    tmp_path: Path, model_dir: Path, rows: list[list[int]], streams: Any, name: str, says: str
) -> None:
    ids = PLAN.served_layer_ids
    states = served(streams, ids)
    file_rows = list(rows)
    if name == "ids read as decoder layers":
        states = [torch.stack([s[min(k, 3)] for k in ids], dim=1) for s in streams]
    elif name == "another row's states":
        file_rows = [rows[1], rows[0], rows[2]]
        states = [states[1], states[0], states[2]]
    elif name == "one layer too few":
        states = [s[:, :2] for s in states]
    out = write_files(tmp_path, file_rows, states)
    if name == "a row without its file":
        (out / "hs_2.safetensors").unlink()
    checks = check_against_transformers(
        model_dir, read_state_files(out), rows, ids, dtype="float32"
    )
    assert any(says in problem for problem in failed(checks)), failed(checks)


def test_fp8_tolerance_still_catches_a_wrong_layer(
    tmp_path: Path, model_dir: Path, rows: list[list[int]], streams: Any
) -> None:
    ids = PLAN.served_layer_ids
    shifted = [torch.stack([s[min(k, 3)] for k in ids], dim=1) for s in streams]
    out = write_files(tmp_path, rows, shifted, fp8=True)
    checks = check_against_transformers(
        model_dir, read_state_files(out), rows, ids, dtype="float32"
    )
    assert failed(checks), "a layer shift must fail even at the FP8 tolerance"


def test_the_generator_generations_files_agree_and_a_shift_does_not(
    tmp_path: Path, rows: list[list[int]], streams: Any
) -> None:
    ids = PLAN.served_layer_ids
    files = read_state_files(write_files(tmp_path / "served", rows, served(streams, ids)))
    generator = tmp_path / "generator"
    generator.mkdir()
    layers = [0, 1, 3]  # speculators 0.3.0's layer i: after decoder layer i
    for i, (ids_, stream) in enumerate(zip(rows[:2], streams[:2], strict=True)):
        sample = {
            "input_ids": torch.tensor(ids_),
            "hidden_states": [stream[i_].to(torch.bfloat16) for i_ in layers],
        }
        torch.save(sample, generator / f"data_{i}.pt")
    checks, samples = check_against_generator(files, ids, generator, layers)
    assert samples == 2 and len(checks) == 2 * 3 and failed(checks) == []
    # Files whose layer i is one layer off (the convention taken the wrong way round) fail.
    off = tmp_path / "off-by-one"
    off.mkdir()
    for i, (ids_, stream) in enumerate(zip(rows[:2], streams[:2], strict=True)):
        sample = {
            "input_ids": torch.tensor(ids_),
            "hidden_states": [stream[min(i_ + 1, 3)].to(torch.bfloat16) for i_ in layers],
        }
        torch.save(sample, off / f"data_{i}.pt")
    checks, _ = check_against_generator(files, ids, off, layers)
    assert len(failed(checks)) >= 4, failed(checks)
    # A sample whose tokens no served file has is a failure, not a skipped sample.
    torch.save({"input_ids": torch.tensor([1, 5, 6]), "hidden_states": []}, off / "data_2.pt")
    checks, samples = check_against_generator(files, ids, off, layers)
    assert samples == 3 and any("no served file has its token ids" in f for f in failed(checks))
    with pytest.raises(VerifyError, match="no common layer"):
        check_against_generator(files, [1, 2, 4], generator, [5, 6])


def test_plan_command_and_connectors() -> None:
    with pytest.raises(VerifyError, match="distinct"):
        ServedPlan(spec=SPEC, target_layer_ids=(0, 2))
    with pytest.raises(VerifyError, match="trains on"):
        ServedPlan(spec=SPEC, target_layer_ids=(1, 2), connectors=(ConnectorRun("fp8", "fp8"),))
    serving = VenvServing(
        {"file": {"kv_connector": "ExampleHiddenStatesConnector", "kv_role": "kv_producer"}},
        scale_out_flag=True,
        versions={},
    )
    run = ConnectorRun("example", "file", override=(("kv_connector", "Misspelled"),))
    assert kv_transfer_config(run, serving)["kv_connector"] == "Misspelled"
    assert serving.kv_transfer_configs["file"]["kv_connector"] == "ExampleHiddenStatesConnector"
    args = vllm_args(run, serving, dtype="float32", max_model_len=512)
    assert "--enable-scale-out" in args and "--enforce-eager" not in args
    old = VenvServing(serving.kv_transfer_configs, scale_out_flag=False, versions={})
    eager = ConnectorRun("fp8", "file", enforce_eager=True)
    assert vllm_args(eager, old, dtype="bfloat16", max_model_len=512) == [
        "--dtype", "bfloat16", "--max-model-len", "512", "--enforce-eager",
    ]  # fmt: skip
    argv = serve_argv(
        Path("/v/bin/python"),
        Path("/m"),
        port=8123,
        layer_ids=[1, 2, 4],
        kv_config={},
        vllm_args=[],
    )
    assert argv[:5] == ["/v/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "/m"]
    spec = json.loads(argv[argv.index("--speculative_config") + 1])
    assert spec == speculative_config([1, 2, 4])
    assert spec["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 4]
    train = PLAN.train_args("/m", "/d", "/s", "/o")
    at = train.index("--target-layer-ids")
    assert train[at + 1 : at + 3] == ["1", "2"] and "--on-missing" in train


def test_prepare_data_rows_per_assistant_turn() -> None:
    rows = expected_turn_rows()
    assert len(rows) == sum(len(c) // 2 for c in CONVERSATIONS)
    # The generator generation's one sample per conversation is the row of its last reply.
    assert {tokens for tokens, _ in expected_samples()} <= {tokens for tokens, _ in rows}
