"""A tiny random Llama and its WordLevel tokenizer, made from a fixed seed (no download).

The same spec and seed give the same weights, tokenizer and prompts on every run, so a
verification failure reproduces exactly. Imports only torch, transformers and tokenizers
(lazily), so the verify venv can run this file as a script too.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
SPECIALS = (UNK, BOS, EOS)  # ids 0, 1, 2


@dataclass(frozen=True)
class TinyLlamaSpec:
    """Shape and seed of the tiny model (head_dim = hidden / heads must be a CPU-attention size)."""

    num_layers: int = 6
    hidden_size: int = 128
    intermediate_size: int = 256
    num_heads: int = 4
    num_kv_heads: int = 2
    vocab_size: int = 512
    max_position_embeddings: int = 4096
    initializer_range: float = 0.1
    seed: int = 1234

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


def word(i: int) -> str:
    """The i-th ordinary word of the vocabulary."""
    return f"w{i}"


def vocab(spec: TinyLlamaSpec) -> dict[str, int]:
    """Token -> id: the specials first, then ordinary words."""
    table = {tok: i for i, tok in enumerate(SPECIALS)}
    for i in range(spec.vocab_size - len(SPECIALS)):
        table[word(i)] = len(SPECIALS) + i
    return table


def make_tokenizer_dir(spec: TinyLlamaSpec, out_dir: Path) -> None:
    """Save a WordLevel fast tokenizer that prepends <s> (bos) and knows </s> (eos)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    table = vocab(spec)
    backend = Tokenizer(models.WordLevel(vocab=table, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, table[BOS])]
    )
    fast: Any = PreTrainedTokenizerFast  # untyped in transformers
    tokenizer = fast(tokenizer_object=backend, bos_token=BOS, eos_token=EOS, unk_token=UNK)
    tokenizer.model_max_length = spec.max_position_embeddings
    tokenizer.save_pretrained(str(out_dir))


def make_tiny_llama(spec: TinyLlamaSpec, out_dir: Path, *, dtype: str = "float32") -> Path:
    """Write a random Llama (config, safetensors, tokenizer) to out_dir and return it.

    The weights are drawn in float32 from the spec's seed, then saved in ``dtype``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    table = vocab(spec)
    config = LlamaConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        initializer_range=spec.initializer_range,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=table[BOS],
        eos_token_id=table[EOS],
        pad_token_id=None,
        dtype=dtype,
    )
    torch.manual_seed(spec.seed)
    llama: Any = LlamaForCausalLM  # untyped in transformers
    model = llama(config).to(torch.float32).to(getattr(torch, dtype)).eval()
    model.save_pretrained(str(out_dir), safe_serialization=True)
    make_tokenizer_dir(spec, out_dir)
    (out_dir / "patchwheel-tiny-llama.json").write_text(
        json.dumps(asdict(spec), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return out_dir


def prompt_texts(spec: TinyLlamaSpec, lengths: list[int], stream: int = 0) -> list[str]:
    """Deterministic texts of the given word counts; each stream draws different words."""
    rng = random.Random(spec.seed * 1_000_003 + stream)
    n_words = spec.vocab_size - len(SPECIALS)
    return [" ".join(word(rng.randrange(n_words)) for _ in range(n)) for n in lengths]


def tokenize_prompts(model_dir: Path, texts: list[str]) -> list[list[int]]:
    """Token ids of each text through the saved tokenizer (bos first)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    return [list(tokenizer(text)["input_ids"]) for text in texts]


def main(argv: list[str] | None = None) -> int:
    """`python model.py OUT_DIR [--seed N]`: write the tiny model (for use from the verify venv)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=TinyLlamaSpec.seed)
    parser.add_argument("--layers", type=int, default=TinyLlamaSpec.num_layers)
    args = parser.parse_args(argv)
    make_tiny_llama(TinyLlamaSpec(seed=args.seed, num_layers=args.layers), args.out_dir)
    print(args.out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
