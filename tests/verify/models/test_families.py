"""The seeded model families: byte-identical from a seed, and each one loads and runs in
transformers (real torch, real transformers; no vLLM)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from patchwheel.errors import VerifyError
from patchwheel.verify.models.families import (
    CARD,
    FACTS,
    FAMILIES,
    WEIGHTS,
    FamilySpec,
    check_config,
    make_family_model,
    parse_families,
    read_card,
)
from patchwheel.verify.models.tiny import BOS
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream

# sha256 of model.safetensors for the default spec of each family, as written on the CPU
# machine (transformers 5.17-5.19): the same bytes must come out on any machine.
GOLDEN = {
    "llama": "5015cbe0eece65e3e34c10e23a93d5b17c8f1518b1fd3c816a2b39508e91b694",
    "qwen3": "e5452d55cc694eb2c3d4d6c2505fe2b87ba172ff754394d4c30948689b5dd031",
    "qwen3_moe": "830281feacbfd053343aecb377b93170caeefebbb615c5d5aad3df95a0b0bf24",
    "deepseek_v3": "d595a8de31d82fe3282616e4b0165ae9772e64aff9dbdd40f340b1decf38c750",
}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    return {f: make_family_model(FamilySpec(f), root / f) for f in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_weights_are_byte_identical_from_the_seed(
    family: str, models: dict[str, Path], tmp_path: Path
) -> None:
    again = make_family_model(FamilySpec(family), tmp_path / "again")
    assert sha(models[family] / WEIGHTS) == GOLDEN[family]
    assert sha(again / WEIGHTS) == GOLDEN[family]
    assert read_card(again)["weights_sha256"] == GOLDEN[family]
    other = make_family_model(FamilySpec(family, seed=7), tmp_path / "other")
    assert sha(other / WEIGHTS) != GOLDEN[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_loads_and_runs_in_transformers(family: str, models: dict[str, Path]) -> None:
    model_dir = models[family]
    config = AutoConfig.from_pretrained(str(model_dir))
    written = json.loads((model_dir / "config.json").read_text("utf-8"))
    for key, want in FACTS[family].items():
        assert written[key] == want, key
    assert config.num_hidden_layers == 4
    # Every tensor of the checkpoint is used: transformers reports none missing or unexpected.
    auto = AutoModelForCausalLM
    _model, info = auto.from_pretrained(
        str(model_dir), dtype=torch.float32, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    ids = tokenizer("w1 w2 w3 w4 w5")["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids(BOS)
    reference = load_reference_model(model_dir, "float32")
    layers = residual_stream(reference, [ids], [0, 1, 3])[0]
    assert [tuple(t.shape) for t in layers] == [(len(ids), config.hidden_size)] * 3
    assert all(torch.isfinite(t).all() for t in layers)
    # Layers differ from one another (a skipped layer would not).
    assert not torch.equal(layers[0], layers[1])


def test_existing_model_is_reused_only_when_card_and_weights_match(tmp_path: Path) -> None:
    spec = FamilySpec("llama", num_layers=2)
    out = make_family_model(spec, tmp_path / "m")
    before = (out / WEIGHTS).stat().st_mtime_ns
    make_family_model(spec, out)
    assert (out / WEIGHTS).stat().st_mtime_ns == before
    data = bytearray((out / WEIGHTS).read_bytes())
    data[-1] ^= 0xFF  # tampered weights are rewritten, not trusted
    (out / WEIGHTS).write_bytes(bytes(data))
    make_family_model(spec, out)
    assert sha(out / WEIGHTS) == read_card(out)["weights_sha256"]
    assert json.loads((out / CARD).read_text("utf-8"))["spec"] == dataclasses.asdict(spec)


def test_bad_specs_and_family_lists_are_refused_by_name() -> None:
    with pytest.raises(VerifyError, match="unknown model family 'gpt2'"):
        FamilySpec("gpt2")
    with pytest.raises(VerifyError, match="num_layers must be >= 2"):
        FamilySpec("deepseek_v3", num_layers=1)
    assert parse_families("all") == FAMILIES
    assert parse_families("qwen3, llama,qwen3") == ("qwen3", "llama")
    with pytest.raises(VerifyError, match="--families 'llama,mistral': unknown mistral"):
        parse_families("llama,mistral")
    with pytest.raises(VerifyError, match="unknown \\(empty\\)"):
        parse_families(" , ")


def test_a_config_that_lost_a_fact_is_refused() -> None:
    spec = FamilySpec("deepseek_v3")
    good = {**FACTS["deepseek_v3"], "num_hidden_layers": 4}
    check_config(spec, good)
    with pytest.raises(VerifyError, match="topk_method=None \\(want 'noaux_tc'\\)"):
        check_config(spec, {k: v for k, v in good.items() if k != "topk_method"})
