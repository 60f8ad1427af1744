"""The tiny random Llama of patchwheel.verify.model, with a tokenizer that carries a chat template.

speculators' preprocessing refuses a tokenizer without a chat template, finds the assistant
spans through it (``_detect_assistant_pattern`` looks for the word "assistant" after a "<" in
the text between two turns) and tokenizes with ``return_offsets_mapping`` (a fast tokenizer).
The weights are model.py's (same spec, same seed). The vocabulary keeps ``spec.vocab_size``
entries: model.py's three specials, three role tokens (ids 3-5, special tokens, so the
WordLevel model never splits them), then the ordinary words ``w0``... (three fewer than
model.py's). A conversation renders as::

    <s> <|user|> w1 w2 </s> <|assistant|> w3 w4 </s>

(the template writes ``<s>`` itself: preprocessing tokenizes with ``add_special_tokens=False``).
For patchwheel.verify.model (the lead integrates it there): ROLE_TOKENS, chat_vocab,
CHAT_TEMPLATE and make_chat_tokenizer_dir.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from patchwheel.verify.model import (
    BOS,
    EOS,
    SPECIALS,
    UNK,
    TinyLlamaSpec,
    make_tiny_llama,
    word,
)

ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    " <|{{ message['role'] }}|> {{ message['content'] }} {{ eos_token }}"
    "{% endfor %}"
    "{% if add_generation_prompt %} <|assistant|>{% endif %}"
)


def chat_vocab(spec: TinyLlamaSpec) -> dict[str, int]:
    """Token -> id: model.py's specials, the role tokens, then ordinary words."""
    table = {tok: i for i, tok in enumerate((*SPECIALS, *ROLE_TOKENS))}
    first = len(table)
    for i in range(spec.vocab_size - first):
        table[word(i)] = first + i
    return table


def make_chat_tokenizer_dir(spec: TinyLlamaSpec, out_dir: Path) -> None:
    """Save a WordLevel fast tokenizer with role tokens and CHAT_TEMPLATE."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    table = chat_vocab(spec)
    backend = Tokenizer(models.WordLevel(vocab=table, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, table[BOS])]
    )
    fast: Any = PreTrainedTokenizerFast
    tokenizer = fast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        additional_special_tokens=list(ROLE_TOKENS),
    )
    tokenizer.model_max_length = spec.max_position_embeddings
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(str(out_dir))


def make_chat_model(spec: TinyLlamaSpec, out_dir: Path) -> Path:
    """model.py's tiny Llama in out_dir, its tokenizer replaced by the chat tokenizer."""
    make_tiny_llama(spec, out_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (out_dir / name).unlink(missing_ok=True)
    make_chat_tokenizer_dir(spec, out_dir)
    return out_dir


def sharegpt_conversations(
    spec: TinyLlamaSpec, turns: list[list[int]], seed: int = 7
) -> list[dict[str, Any]]:
    """ShareGPT-style records: each inner list gives the word counts of alternating turns
    (human first). Words are drawn from the ordinary words of chat_vocab."""
    rng = random.Random(seed)
    n_words = spec.vocab_size - len(SPECIALS) - len(ROLE_TOKENS)
    records = []
    for conversation in turns:
        records.append(
            {
                "conversations": [
                    {
                        "from": "human" if t % 2 == 0 else "gpt",
                        "value": " ".join(word(rng.randrange(n_words)) for _ in range(n)),
                    }
                    for t, n in enumerate(conversation)
                ]
            }
        )
    return records


def write_sharegpt_json(records: list[dict[str, Any]], path: Path) -> Path:
    """A JSON file speculators' load_raw_dataset reads (a list of records)."""
    path.write_text(json.dumps(records), encoding="utf-8")
    return path
