"""The comparison catches every way an extraction can be wrong, and tolerates rounding only."""

from __future__ import annotations

import pytest
import torch

from patchwheel.verify.oracles.compare import (
    EPS,
    RTOL,
    Extracted,
    compare_call,
    max_error_per_layer,
    tolerance,
)

LAYERS = [0, 3]


def reference(lengths: list[int], hidden: int = 16) -> list[list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [[torch.randn(n, hidden, generator=gen) * 4 for _ in LAYERS] for n in lengths]


def prompts(lengths: list[int]) -> list[list[int]]:
    return [list(range(1, n + 1)) for n in lengths]


def exact(ps: list[list[int]], ref: list[list[torch.Tensor]]) -> list[Extracted]:
    return [Extracted(list(p), [t.clone() for t in r]) for p, r in zip(ps, ref, strict=True)]


def problems(checks: list) -> list[str]:  # type: ignore[type-arg]
    return [c.describe() for c in checks if not c.ok]


def test_identical_tensors_pass_with_zero_error() -> None:
    lengths = [5, 1, 12]
    ref = reference(lengths)
    checks = compare_call(0, prompts(lengths), exact(prompts(lengths), ref), ref, LAYERS, "float32")
    assert problems(checks) == []
    assert len(checks) == len(lengths) * len(LAYERS)
    assert max_error_per_layer(checks) == {0: 0.0, 3: 0.0}


def test_float32_rounding_noise_passes_but_bfloat16_rounding_fails_float32() -> None:
    lengths = [8]
    ref = reference(lengths)
    ps = prompts(lengths)
    noisy = [Extracted(ps[0], [t * (1 + 50 * EPS["float32"]) for t in ref[0]])]
    assert problems(compare_call(0, ps, noisy, ref, LAYERS, "float32")) == []
    rounded = [Extracted(ps[0], [t.to(torch.bfloat16).to(torch.float32) for t in ref[0]])]
    failed = problems(compare_call(0, ps, rounded, ref, LAYERS, "float32"))
    assert len(failed) == len(LAYERS)
    assert "layer 0, call 0 prompt 0 (8 tokens): max abs error" in failed[0]
    assert "> tolerance" in failed[0]


def test_rows_of_the_wrong_request_or_position_fail() -> None:
    lengths = [6, 6]
    ref = reference(lengths)
    ps = prompts(lengths)
    swapped = exact(ps, [ref[1], ref[0]])
    swapped = [Extracted(ps[i], swapped[i].hidden_states) for i in range(2)]
    assert len(problems(compare_call(1, ps, swapped, ref, LAYERS, "bfloat16"))) == 4
    shifted = [Extracted(ps[0], [torch.roll(t, 1, dims=0) for t in ref[0]]), exact(ps, ref)[1]]
    failed = problems(compare_call(1, ps, shifted, ref, LAYERS, "bfloat16"))
    assert [f.split(":")[0] for f in failed] == [
        "layer 0, call 1 prompt 0 (6 tokens)",
        "layer 3, call 1 prompt 0 (6 tokens)",
    ]


def test_missing_rows_wrong_dtype_and_layer_count_fail() -> None:
    lengths = [10]
    ref = reference(lengths)
    ps = prompts(lengths)
    short = [Extracted(ps[0], [t[:7] for t in ref[0]])]
    assert (
        "shape (7, 16), expected (10, 16)"
        in problems(compare_call(0, ps, short, ref, LAYERS, "float32"))[0]
    )
    half = [Extracted(ps[0], [t.to(torch.bfloat16) for t in ref[0]])]
    assert (
        "dtype torch.bfloat16, expected torch.float32"
        in problems(compare_call(0, ps, half, ref, LAYERS, "float32"))[0]
    )
    one_layer = [Extracted(ps[0], ref[0][:1])]
    assert problems(compare_call(0, ps, one_layer, ref, LAYERS, "float32")) == [
        "all layers, call 0 prompt 0 (10 tokens): 1 hidden-state tensors for 2 layers"
    ]


def test_input_ids_round_trip_and_result_count_are_checked() -> None:
    lengths = [4, 4]
    ref = reference(lengths)
    ps = prompts(lengths)
    wrong_ids = exact(ps, ref)
    wrong_ids[1] = Extracted([9, 9, 9, 9], wrong_ids[1].hidden_states)
    assert problems(compare_call(0, ps, wrong_ids, ref, LAYERS, "float32")) == [
        "all layers, call 0 prompt 1 (4 tokens): "
        "input_ids differ from the prompt (round trip failed)"
    ]
    missing = exact(ps, ref)[:1]
    assert (
        "no result (generate returned 1 results)"
        in problems(compare_call(0, ps, missing, ref, LAYERS, "float32"))[0]
    )
    extra = [*exact(ps, ref), exact(ps, ref)[0]]
    assert (
        "3 results for 2 prompts" in problems(compare_call(0, ps, extra, ref, LAYERS, "float32"))[0]
    )


def test_nan_never_passes() -> None:
    ref = reference([3])
    ps = prompts([3])
    bad = [Extracted(ps[0], [t.clone() for t in ref[0]])]
    bad[0].hidden_states[1][1, 2] = float("nan")
    assert len(problems(compare_call(0, ps, bad, ref, LAYERS, "float32"))) == 1


def test_tolerance_scales_with_magnitude_and_dtype() -> None:
    assert tolerance("float32", 10.0) == pytest.approx(10 * RTOL["float32"])
    assert RTOL["bfloat16"] == 16 * EPS["bfloat16"]
    assert RTOL["float32"] < RTOL["float16"] < RTOL["bfloat16"]
    with pytest.raises(ValueError, match="no tolerance for dtype 'int8'"):
        tolerance("int8", 1.0)
