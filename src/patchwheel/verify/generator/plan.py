"""What a CPU verification runs: the model, the layers, the step budget and the prompts.

The default plan is chosen to break every way the capture path is known to drift: prompts
longer than one scheduling step (split by chunked prefill), several prompts sharing a step
(reordered by the runner), a one-token prompt, a prompt exactly one step long, two
`generate` calls on one generator (the V1 step protocol), and, in the second call, an exact
repeat of a first-call prompt (a prefix-cache hit would skip its forward pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchwheel.verify.models.tiny import TinyLlamaSpec, prompt_texts, tokenize_prompts

# Word counts per generate call; the tokenizer adds <s>, so prompts are one token longer.
DEFAULT_CALLS: tuple[tuple[int, ...], ...] = (
    (479, 40, 299, 0, 255, 128),
    (16, 1000, 63),
)
# (call, prompt) of DEFAULT_CALLS repeated verbatim at the end of the next call.
REPEATED_PROMPT = (0, 2)
MAX_NUM_SEQS = 32  # speculators' generator schedules at most 32 sequences a step


@dataclass(frozen=True)
class VerifyPlan:
    """Settings of one verification run (defaults: the run `nox -s verify` makes)."""

    dtype: str = "float32"
    layer_ids: tuple[int, ...] = (0, 2, 4, 5)
    max_num_batched_tokens: int = 256
    max_model_len: int = 2048
    gpu_memory_utilization: float = 0.3
    kv_cache_gib: int = 1
    calls: tuple[tuple[int, ...], ...] = DEFAULT_CALLS
    repeat_prompt: tuple[int, int] | None = REPEATED_PROMPT
    spec: TinyLlamaSpec = field(default_factory=TinyLlamaSpec)

    def generator_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for VllmHiddenStatesGenerator besides model path and layers."""
        return {
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "tensor_parallel_size": 1,
            "dtype": self.dtype,
            "max_num_batched_tokens": self.max_num_batched_tokens,
        }

    def oracle_settings(self) -> dict[str, Any]:
        """What the vLLM oracle is asked for: the generator's dtype, model length, step budget
        and memory, and the generator's own sequences per step (its engine records what it
        ran with)."""
        return {
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": MAX_NUM_SEQS,
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }

    def prompts(self, model_dir: Path) -> list[list[list[int]]]:
        """Token ids of every prompt of every call, through the model's own tokenizer."""
        calls = [
            tokenize_prompts(model_dir, prompt_texts(self.spec, list(lengths), stream=c))
            for c, lengths in enumerate(self.calls)
        ]
        if self.repeat_prompt is not None and len(calls) > 1:
            c, p = self.repeat_prompt
            calls[c + 1].append(list(calls[c][p]))
        return calls


def extraction_request(
    plan: VerifyPlan, model_dir: Path, calls: list[list[list[int]]]
) -> dict[str, Any]:
    """The request the extraction script reads (its ``request.json``)."""
    return {
        "model_dir": str(model_dir),
        "layer_ids": list(plan.layer_ids),
        "generator": plan.generator_kwargs(),
        "calls": calls,
    }
