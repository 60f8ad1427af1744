"""The tolerance catches every known wrong-rows bug and passes honest rounding differences.

Each bug is made from the real tiny Llama's residual stream (transformers), the way a broken
capture path would make it, and fed to the comparison the verification runs. Stand-ins for
honest rounding (the same function computed another way) must pass.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from patchwheel.verify.models.tiny import TinyLlamaSpec, make_tiny_llama
from patchwheel.verify.oracles.compare import Extracted, TensorCheck, compare_call
from patchwheel.verify.oracles.reference import load_reference_model, residual_stream

LAYERS = [0, 2, 4, 5]
STEP = 64  # a stand-in step budget: prompts longer than it come in chunks
# The prompts of one generate call: two of one length (so another prompt's rows fit), one
# longer than a step, one token.
LENGTHS = [40, 40, 150, 1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(TinyLlamaSpec(), tmp_path_factory.mktemp("wrong-rows") / "model")


@pytest.fixture(scope="module")
def model(model_dir: Path) -> Any:
    return load_reference_model(model_dir, "float32")


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    gen = torch.Generator().manual_seed(5)
    return [[1, *torch.randint(3, 512, (n - 1,), generator=gen).tolist()] for n in LENGTHS]


@pytest.fixture(scope="module")
def reference(model: Any, prompts: list[list[int]]) -> list[list[torch.Tensor]]:
    return residual_stream(model, prompts, LAYERS)


def _all_layers(model: Any, ids: list[int], start: int = 0) -> list[torch.Tensor]:
    """The residual stream before layer 0 (embeddings) and after every layer."""
    with torch.inference_mode():
        out = model(
            input_ids=torch.tensor([ids]),
            position_ids=torch.arange(start, start + len(ids))[None],
            output_hidden_states=True,
            use_cache=False,
        )
    states: tuple[torch.Tensor, ...] = out.hidden_states
    # hidden_states[-1] is after the final norm; the last layer's stream comes from the hook.
    return [s[0] for s in states[:-1]]


def _failed(
    prompts: list[list[int]], reference: list[list[torch.Tensor]], got: list[list[torch.Tensor]]
) -> list[TensorCheck]:
    extracted = [Extracted(p, g) for p, g in zip(prompts, got, strict=True)]
    checks = compare_call(0, prompts, extracted, reference, LAYERS, "float32")
    return [c for c in checks if not c.ok]


Bug = Callable[[Any, list[list[int]], list[list[torch.Tensor]]], list[list[torch.Tensor]]]


def wrong_layer(model: Any, prompts: list[list[int]], ref: list[list[torch.Tensor]]) -> Any:
    # Off by one in the layer index: the stream after layer L - 1 reported as layer L.
    return [[_all_layers(model, p)[layer] for layer in LAYERS] for p in prompts]


def shifted_by_one_token(model: Any, prompts: list[list[int]], ref: Any) -> Any:
    return [[torch.cat([t[:1], t[:-1]]) for t in r] for r in ref]


def another_prompts_rows(model: Any, prompts: list[list[int]], ref: Any) -> Any:
    # Prompts 0 and 1 have the same length: their rows swapped, as a wrong request mapping would.
    return [ref[1], ref[0], *ref[2:]]


def zeros(model: Any, prompts: list[list[int]], ref: Any) -> Any:
    return [[torch.zeros_like(t) for t in r] for r in ref]


def residual_not_added(model: Any, prompts: list[list[int]], ref: Any) -> Any:
    # The layer's own contribution (hidden_states) without the residual it is added to.
    out = []
    for p in prompts:
        streams = [*_all_layers(model, p)]
        last = residual_stream(model, [p], [len(streams) - 1])[0][0]
        streams.append(last)
        out.append([streams[layer + 1] - streams[layer] for layer in LAYERS])
    return out


def later_chunk_without_context(model: Any, prompts: list[list[int]], ref: Any) -> Any:
    # The long prompt's second and later steps run with the right positions but without the
    # earlier steps' keys and values (a KV cache not carried across steps).
    out = [list(r) for r in ref]
    long = LENGTHS.index(max(LENGTHS))
    ids = prompts[long]
    rows = [list(t.unbind()) for t in ref[long]]
    for start in range(STEP, len(ids), STEP):
        chunk = ids[start : start + STEP]
        alone = _all_layers(model, chunk, start=start)
        last = _last_layer(model, chunk, start)
        alone.append(last)
        for k, layer in enumerate(LAYERS):
            rows[k][start : start + len(chunk)] = list(alone[layer + 1].unbind())
    out[long] = [torch.stack(r) for r in rows]
    return out


def _last_layer(model: Any, ids: list[int], start: int) -> torch.Tensor:
    captured: list[torch.Tensor] = []
    layer = model.model.layers[-1]

    def hook(_module: Any, _args: Any, output: Any) -> None:
        hidden = output[0] if isinstance(output, tuple) else output
        captured.append(hidden[0].clone())

    handle = layer.register_forward_hook(hook)
    try:
        _all_layers(model, ids, start)
    finally:
        handle.remove()
    return captured[0]


BUGS: list[Bug] = [
    wrong_layer,
    shifted_by_one_token,
    another_prompts_rows,
    zeros,
    residual_not_added,
    later_chunk_without_context,
]


@pytest.mark.parametrize("bug", BUGS, ids=[b.__name__ for b in BUGS])
def test_each_wrong_rows_bug_fails_the_comparison(
    bug: Bug, model: Any, prompts: list[list[int]], reference: list[list[torch.Tensor]]
) -> None:
    got = bug(model, prompts, reference)
    failed = _failed(prompts, reference, got)
    assert failed, f"{bug.__name__} passed the comparison"
    # The failures are tolerance failures on the layers, not shape or count problems.
    assert all(c.layer is not None and "max abs error" in (c.problem or "") for c in failed)


def test_the_same_computation_in_float64_passes(
    model_dir: Path, prompts: list[list[int]], reference: list[list[torch.Tensor]]
) -> None:
    # Another summation order and precision: the float64 model's stream rounded to float32.
    wide = load_reference_model(model_dir, "float32").to(torch.float64)
    got = [[t.to(torch.float32) for t in r] for r in residual_stream(wide, prompts, LAYERS)]
    pairs = [
        (g, r) for gs, rs in zip(got, reference, strict=True) for g, r in zip(gs, rs, strict=True)
    ]
    assert any(not torch.equal(g, r) for g, r in pairs)
    assert _failed(prompts, reference, got) == []


def test_bfloat16_model_passes_against_the_float32_stream_rounded(
    model_dir: Path, prompts: list[list[int]], reference: list[list[torch.Tensor]]
) -> None:
    # The bfloat16 model's stream against the float32 stream rounded to bfloat16: rounding at
    # bfloat16's scale, under bfloat16's tolerance.
    half = load_reference_model(model_dir, "bfloat16")
    got = residual_stream(half, prompts, LAYERS)
    rounded = [[t.to(torch.bfloat16) for t in r] for r in reference]
    extracted = [Extracted(p, g) for p, g in zip(prompts, got, strict=True)]
    checks = compare_call(0, prompts, extracted, rounded, LAYERS, "bfloat16")
    assert [c.describe() for c in checks if not c.ok] == []
    assert max(c.max_abs_error or 0.0 for c in checks) > 0
