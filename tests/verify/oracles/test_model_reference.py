"""The tiny model and the transformers reference, with real torch and transformers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from patchwheel.verify.generator.plan import VerifyPlan
from patchwheel.verify.models.tiny import (
    BOS,
    EOS,
    TinyLlamaSpec,
    make_tiny_llama,
    prompt_texts,
    tokenize_prompts,
)
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream

SMALL = TinyLlamaSpec(num_layers=3, vocab_size=64, max_position_embeddings=256)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(SMALL, tmp_path_factory.mktemp("tiny"))


def weights_sha(path: Path) -> str:
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_same_seed_same_weights_other_seed_other_weights(model_dir: Path, tmp_path: Path) -> None:
    again = make_tiny_llama(SMALL, tmp_path / "again")
    other = make_tiny_llama(TinyLlamaSpec(**{**vars(SMALL), "seed": 7}), tmp_path / "other")
    assert weights_sha(again) == weights_sha(model_dir)
    assert weights_sha(other) != weights_sha(model_dir)


def test_model_is_a_float32_llama_of_the_spec(model_dir: Path) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_hidden_layers"] == SMALL.num_layers
    assert config["hidden_size"] == SMALL.hidden_size
    assert config["dtype"] == "float32"
    assert json.loads((model_dir / "patchwheel-tiny-llama.json").read_text())["seed"] == SMALL.seed


def test_tokenizer_is_word_level_with_bos_and_eos(model_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    assert tokenizer.bos_token == BOS and tokenizer.eos_token == EOS
    assert tokenizer.bos_token_id == 1 and tokenizer.eos_token_id == 2
    ids = tokenizer("w0 w5 w60")["input_ids"]
    assert ids == [1, 3, 8, 63]
    assert tokenizer.decode(ids[1:]) == "w0 w5 w60"
    assert tokenizer("nonsense")["input_ids"] == [1, 0]  # <unk>


def test_prompts_are_deterministic_and_streams_differ(model_dir: Path) -> None:
    first = prompt_texts(SMALL, [5, 0, 9])
    assert first == prompt_texts(SMALL, [5, 0, 9])
    assert first != prompt_texts(SMALL, [5, 0, 9], stream=1)
    ids = tokenize_prompts(model_dir, first)
    assert [len(p) for p in ids] == [6, 1, 10]
    assert all(p[0] == 1 for p in ids)


def test_default_plan_covers_the_known_drifts(model_dir: Path) -> None:
    plan = VerifyPlan(spec=SMALL)
    calls = plan.prompts(model_dir)
    assert len(calls) >= 2
    lengths = [len(p) for call in calls for p in call]
    assert any(n > plan.max_num_batched_tokens for n in lengths)
    assert plan.max_num_batched_tokens in lengths and 1 in lengths
    assert calls[1][-1] == calls[0][2]  # an exact repeat in the second call


def test_hooks_give_the_residual_stream_of_every_layer(model_dir: Path) -> None:
    model = load_reference_model(model_dir, "float32")
    ids = [1, 4, 9, 16, 25, 36, 49]
    layers = list(range(SMALL.num_layers))
    (hooked,) = residual_stream(model, [ids], layers)
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False)
    states = [h[0] for h in out.hidden_states]
    assert len(states) == SMALL.num_layers + 1
    for layer in layers[:-1]:
        assert torch.equal(hooked[layer], states[layer + 1])
    # The last entry of output_hidden_states is taken after the final norm; the hook's is not.
    assert not torch.allclose(hooked[-1], states[-1])
    with torch.inference_mode():
        assert torch.allclose(model.model.norm(hooked[-1]), states[-1], atol=1e-6)
    assert all(t.shape == (len(ids), SMALL.hidden_size) for t in hooked)


def test_reference_runs_each_prompt_alone_in_the_requested_dtype(model_dir: Path) -> None:
    model = load_reference_model(model_dir, "bfloat16")
    short, long = [1, 5, 6], [1, 5, 6, 7, 8, 9, 10]
    together = residual_stream(model, [short, long], [0, 2])
    (alone,) = residual_stream(model, [short], [0, 2])
    assert all(t.dtype == torch.bfloat16 for t in together[0])
    assert all(torch.equal(a, b) for a, b in zip(alone, together[0], strict=True))
    # Causal: the longer prompt's first tokens see exactly what the short prompt saw.
    assert torch.allclose(together[1][1][:3].float(), alone[1].float(), atol=1e-2)


def test_reference_rejects_a_layer_the_model_lacks(model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    with pytest.raises(ValueError, match="layer 3 out of range"):
        residual_stream(model, [[1, 2]], [3])
