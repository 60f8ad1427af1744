"""The reference: the residual stream after chosen decoder layers, computed by transformers.

speculators captures ``hidden_states + residual`` after decoder layer *i*, before the final
norm. In transformers that is exactly the output of ``model.model.layers[i]`` (each decoder
layer returns ``residual + mlp(...)``), so a forward hook on each requested layer gives the
reference for every layer, the last one included (``output_hidden_states`` would not: its
last entry is taken after the final norm). Each prompt runs alone (batch of one, no padding),
so nothing but the weights and the token ids can influence it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

DTYPES = ("float32", "bfloat16", "float16")


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for one of DTYPES."""
    import torch

    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}: expected one of {', '.join(DTYPES)}")
    dtype: torch.dtype = getattr(torch, name)
    return dtype


def load_reference_model(model_dir: Path, dtype: str) -> Any:
    """The transformers causal LM of model_dir in dtype, eval mode, plain (eager) attention."""
    from transformers import AutoModelForCausalLM

    auto: Any = AutoModelForCausalLM
    model = auto.from_pretrained(
        str(model_dir), dtype=torch_dtype(dtype), attn_implementation="eager"
    )
    return model.eval()


def residual_stream(
    model: Any, prompts: Sequence[Sequence[int]], layer_ids: Sequence[int]
) -> list[list[torch.Tensor]]:
    """For each prompt, one [len(prompt), hidden] tensor per layer in layer_ids (that order)."""
    import torch

    layers = model.model.layers
    for layer_id in layer_ids:
        if not 0 <= layer_id < len(layers):
            raise ValueError(f"layer {layer_id} out of range: the model has {len(layers)} layers")
    captured: dict[int, torch.Tensor] = {}

    def hook_for(layer_id: int) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            captured[layer_id] = hidden[0].detach().clone()

        return hook

    handles = [layers[i].register_forward_hook(hook_for(i)) for i in layer_ids]
    results: list[list[torch.Tensor]] = []
    try:
        with torch.inference_mode():
            for ids in prompts:
                captured.clear()
                model(input_ids=torch.tensor([list(ids)], dtype=torch.long), use_cache=False)
                results.append([captured[i] for i in layer_ids])
    finally:
        for handle in handles:
            handle.remove()
    return results
