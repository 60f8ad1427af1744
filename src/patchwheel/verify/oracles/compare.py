"""Compare what the generator returned with the reference, tensor by tensor.

Every (generate call, prompt, layer) is checked for: a result present, ``input_ids`` equal
to the prompt (round trip), one tensor per requested layer, shape ``[prompt tokens,
hidden]``, the requested dtype, and a maximum absolute error within tolerance.

Tolerance: ``max|extracted - reference| <= RTOL[dtype] * max|reference|``, per tensor.
Both sides compute the same function of the same weights in the same dtype; they differ
only in rounding: vLLM fuses the residual add into RMSNorm and runs its own CPU GEMM and
paged-attention kernels, transformers runs unfused eager ops. Rounding differences start at
about one unit roundoff of the dtype relative to the tensor's magnitude and compound through
the layers (the residual stream carries every earlier layer's error forward, and attention
and MLP amplify it through random weights), so the bound is relative to the largest
magnitude in the tensor and a fixed multiple of the dtype's machine epsilon ``eps``:

- float32, eps = 2^-23 = 1.2e-7: measured worst case on the tiny model (6 layers, prompts
  up to 1001 tokens) 2.8e-6 = 24 eps at the deepest layers. RTOL = 1e-4 (about 840 eps)
  keeps a 35x margin for other CPUs' kernels, yet is far below any real fault: the wrong request's
  rows, a shifted position, a skipped layer or norm all give errors of the order of the
  tensor itself (relative error near 1), and running in bfloat16 instead of float32 (the
  "auto" dtype) gives about 3e-2, 300x the bound.
- bfloat16, eps = 2^-7 = 7.8e-3: measured worst case 4.2e-2 = 5.4 eps at the last layer.
  RTOL = 16 eps = 0.125: a 3x margin, still 8x below the relative error of a wrong row.
- float16, eps = 2^-10: same reasoning as bfloat16, RTOL = 16 eps = 1.6e-2.
- float8_e4m3fn (hs-connectors' FP8 connector: each token's states scaled to the format's
  range, then rounded to 3 mantissa bits; compared dequantized, in float32): rounding moves a
  value by at most half a unit in its binade, 2^-4 of its magnitude. RTOL = 2^-3 = 0.125 (one
  unit) keeps a 2x margin and is still 8x below the relative error of a wrong row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from patchwheel.verify.generator.plan import VerifyPlan

EPS: dict[str, float] = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}
RTOL: dict[str, float] = {
    "float32": 1e-4,
    "bfloat16": 16 * EPS["bfloat16"],
    "float16": 16 * EPS["float16"],
}
# Formats hidden states are stored in, not computed in (compared dequantized, in float32).
STORED_RTOL: dict[str, float] = {"float8_e4m3fn": 2.0**-3}
_TINY = 1e-30

Calls = list[list[list[int]]]  # [call][prompt] token ids
Reference = list[list[list[Any]]]  # [call][prompt][layer] tensors


def tolerance(dtype: str, scale: float) -> float:
    """The largest acceptable max abs error for a reference tensor of max magnitude `scale`."""
    rtol = RTOL.get(dtype, STORED_RTOL.get(dtype))
    if rtol is None:
        known = ", ".join([*RTOL, *STORED_RTOL])
        raise ValueError(f"no tolerance for dtype {dtype!r}: expected one of {known}")
    return rtol * max(scale, _TINY)


@dataclass(frozen=True)
class Extracted:
    """What one `generate` call returned for one prompt."""

    input_ids: list[int]
    hidden_states: list[torch.Tensor]


@dataclass(frozen=True)
class TensorCheck:
    """The verdict on one (call, prompt, layer) tensor, or on a prompt's whole result."""

    call: int
    prompt: int
    tokens: int
    layer: int | None
    max_abs_error: float | None
    scale: float | None
    tolerance: float | None
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def describe(self) -> str:
        """`layer L, call C prompt P (N tokens): problem` for error messages."""
        layer = "all layers" if self.layer is None else f"layer {self.layer}"
        where = f"{layer}, call {self.call} prompt {self.prompt} ({self.tokens} tokens)"
        return f"{where}: {self.problem}"


def check_tensor(
    got: torch.Tensor, ref: torch.Tensor, dtype: str
) -> tuple[float | None, float, float, str | None]:
    """(max abs error, reference scale, tolerance, problem or None) for one tensor."""
    import torch

    scale = float(ref.abs().max().item()) if ref.numel() else 0.0
    tol = tolerance(dtype, scale)
    if tuple(got.shape) != tuple(ref.shape):
        return None, scale, tol, f"shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    if got.dtype != ref.dtype:
        return None, scale, tol, f"dtype {got.dtype}, expected {ref.dtype}"
    if got.numel() == 0:
        return 0.0, scale, tol, None
    diff = (got.to(torch.float64) - ref.to(torch.float64)).abs()
    error = float(diff.max().item())
    if not error <= tol:  # also catches NaN
        token = int(diff.max(dim=-1).values.argmax().item())
        return (
            error,
            scale,
            tol,
            (
                f"max abs error {error:.3e} > tolerance {tol:.3e} ({dtype}, scale {scale:.3g}), "
                f"worst at token {token}"
            ),
        )
    return error, scale, tol, None


def compare_call(
    call: int,
    prompts: Sequence[Sequence[int]],
    extracted: Sequence[Extracted],
    reference: Sequence[Sequence[torch.Tensor]],
    layer_ids: Sequence[int],
    dtype: str,
) -> list[TensorCheck]:
    """Check every prompt of one `generate` call against its reference tensors."""
    checks: list[TensorCheck] = []
    for p, ids in enumerate(prompts):
        n = len(ids)

        def whole(problem: str, p: int = p, n: int = n) -> TensorCheck:
            return TensorCheck(call, p, n, None, None, None, None, problem)

        if p >= len(extracted):
            checks.append(whole(f"no result (generate returned {len(extracted)} results)"))
            continue
        result = extracted[p]
        if list(result.input_ids) != list(ids):
            checks.append(whole("input_ids differ from the prompt (round trip failed)"))
        if len(result.hidden_states) != len(layer_ids):
            checks.append(
                whole(
                    f"{len(result.hidden_states)} hidden-state tensors for {len(layer_ids)} layers"
                )
            )
            continue
        for layer, got, ref in zip(layer_ids, result.hidden_states, reference[p], strict=True):
            error, scale, tol, problem = check_tensor(got, ref, dtype)
            checks.append(TensorCheck(call, p, n, layer, error, scale, tol, problem))
    if len(extracted) > len(prompts):
        checks.append(
            TensorCheck(
                call,
                len(prompts),
                0,
                None,
                None,
                None,
                None,
                f"{len(extracted)} results for {len(prompts)} prompts",
            )
        )
    return checks


def max_error_per_layer(checks: Sequence[TensorCheck]) -> dict[int, float]:
    """The largest measured max abs error of each layer over every call and prompt."""
    worst: dict[int, float] = {}
    for check in checks:
        if check.layer is not None and check.max_abs_error is not None:
            worst[check.layer] = max(worst.get(check.layer, 0.0), check.max_abs_error)
    return dict(sorted(worst.items()))


def as_reference(results: list[list[Extracted]]) -> Reference:
    """A side's rows in the shape compare_call takes as its reference."""
    return [[list(r.hidden_states) for r in call] for call in results]


def compare_all(
    plan: VerifyPlan, calls: Calls, got: list[list[Extracted]], reference: Reference
) -> list[TensorCheck]:
    """Every (call, prompt, layer) of ``got`` against ``reference`` by compare_call's rules."""
    checks: list[TensorCheck] = []
    for c, prompts in enumerate(calls):
        checks.extend(compare_call(c, prompts, got[c], reference[c], plan.layer_ids, plan.dtype))
    return checks
