"""A chat-template tokenizer for the tiny models, and ShareGPT-style conversations for it.

speculators' preprocessing refuses a tokenizer without a chat template, finds the assistant
spans through it (it looks for the word "assistant" after a "<" between two turns) and
tokenizes with ``return_offsets_mapping`` (a fast tokenizer). Every tiny model family shares
this tokenizer: its vocabulary is :mod:`patchwheel.verify.models.tiny`'s three specials, three role
tokens (ids 3-5, special tokens, so WordLevel never splits them), then ordinary words ``w0``…
up to the model's vocabulary size. A conversation renders as::

    <s> <|user|> w1 w2 </s> <|assistant|> w3 w4 </s>

(the template writes ``<s>`` itself: preprocessing tokenizes with ``add_special_tokens=False``).
Imports only the standard library, tokenizers and transformers (lazily).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patchwheel.verify.models.tiny import BOS, EOS, SPECIALS, UNK, word

ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    " <|{{ message['role'] }}|> {{ message['content'] }} {{ eos_token }}"
    "{% endfor %}"
    "{% if add_generation_prompt %} <|assistant|>{% endif %}"
)
# Word counts of alternating turns (human first) of the verification's conversations: short
# and long, one or several turns, one reply far longer than its question.
CONVERSATIONS: tuple[tuple[int, ...], ...] = (
    (12, 30),
    (20, 45, 8, 60),
    (5, 10),
    (40, 100, 30, 80, 10, 20),
    (7, 15),
    (33, 66),
    (9, 21, 14, 35),
    (50, 25),
    (3, 200),
    (16, 32, 16, 32),
)
_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def chat_vocab(vocab_size: int) -> dict[str, int]:
    """Token -> id: the specials, the role tokens, then ordinary words up to vocab_size."""
    table = {tok: i for i, tok in enumerate((*SPECIALS, *ROLE_TOKENS))}
    first = len(table)
    for i in range(vocab_size - first):
        table[word(i)] = first + i
    return table


def write_chat_tokenizer(model_dir: Path, vocab_size: int, max_length: int) -> Path:
    """Replace model_dir's tokenizer by the chat tokenizer (same size); return model_dir."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    for name in _FILES:
        (model_dir / name).unlink(missing_ok=True)
    table = chat_vocab(vocab_size)
    backend = Tokenizer(models.WordLevel(vocab=table, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, table[BOS])]
    )
    fast: Any = PreTrainedTokenizerFast  # untyped in transformers
    tokenizer = fast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        additional_special_tokens=list(ROLE_TOKENS),
    )
    tokenizer.model_max_length = max_length
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(str(model_dir))
    return model_dir


def sharegpt_records(
    vocab_size: int, turns: Sequence[Sequence[int]] = CONVERSATIONS, seed: int = 7
) -> list[dict[str, Any]]:
    """ShareGPT-style records; each inner sequence gives the word counts of its turns."""
    rng = random.Random(seed)
    n_words = vocab_size - len(SPECIALS) - len(ROLE_TOKENS)
    return [
        {
            "conversations": [
                {
                    "from": "human" if t % 2 == 0 else "gpt",
                    "value": " ".join(word(rng.randrange(n_words)) for _ in range(n)),
                }
                for t, n in enumerate(conversation)
            ]
        }
        for conversation in turns
    ]


def expected_samples(turns: Sequence[Sequence[int]] = CONVERSATIONS) -> list[tuple[int, int]]:
    """Sorted (tokens, loss-mask tokens) of each conversation under CHAT_TEMPLATE: ``<s>``,
    then per turn a role token, its words and ``</s>``; the mask covers the assistant words."""
    return sorted(
        (1 + sum(n + 2 for n in conversation), sum(n for i, n in enumerate(conversation) if i % 2))
        for conversation in turns
    )


def expected_turn_rows(turns: Sequence[Sequence[int]] = CONVERSATIONS) -> list[tuple[int, int]]:
    """Sorted (tokens, loss-mask tokens) of each training row speculators >= 0.5 prepares: one
    per assistant turn (``prepare-data`` renders each conversation up to each reply), whose
    mask covers that reply's words and its ``</s>``."""
    return sorted(
        (1 + sum(n + 2 for n in conversation[: t + 1]), conversation[t] + 1)
        for conversation in turns
        for t in range(1, len(conversation), 2)
    )


def write_sharegpt(records: list[dict[str, Any]], path: Path) -> Path:
    """A JSON file speculators' dataset loader reads (a list of records)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path
