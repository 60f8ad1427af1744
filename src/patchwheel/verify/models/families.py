"""Tiny seeded models of the families users extract from: Llama, Qwen3, Qwen3-MoE, DeepSeek-V3.

Each model directory holds ``config.json``, ``model.safetensors``, the verify harness's
tokenizer (:mod:`patchwheel.verify.models.tiny`, so every family sees the same prompts) and
``patchwheel-family.json`` (the spec, the config facts the check depends on, the weights'
sha256).

Determinism: the weights are *not* transformers' random init (its order of draws is a
transformers implementation detail). transformers builds the model once, only to learn the
checkpoint's tensor names and shapes (the Hugging Face on-disk layout, e.g. per-expert
``mlp.experts.{e}.gate_proj.weight``, which is what vLLM reads); every tensor is then drawn from
its own ``torch.Generator`` seeded by ``sha256(seed, tensor name)`` and written with safetensors
(transformers' own serialisation library; sorted keys, fixed metadata). The same spec gives a
byte-identical ``model.safetensors`` on every run and machine; the card's sha256 proves it.

MoE routing cannot make a check flaky: every expert is active (``num_experts_per_tok`` equals
the number of routed experts; for DeepSeek-V3 ``topk_group == n_group``), so there is no top-k
choice that rounding could flip between two implementations or two batchings. The routing
weights still differ per expert and per token, so a wrong expert/weight pairing, a missing
shared expert or a lost ``routed_scaling_factor`` still changes the output.

Shapes suit vLLM's kernels on CPU and GPU: head sizes CPU attention and FlashAttention accept;
for MLA ``kv_lora_rank + qk_rope_head_dim = 576`` (the only latent width CPU_MLA and
FlashAttention-MLA decode take) and ``(qk_nope, qk_rope, v) = (64, 64, 128)``, one of the
dimension sets FlashAttention-MLA prefill accepts on Hopper.

Imports only the standard library, torch and transformers (with its safetensors and
tokenizers), lazily: the GPU session runs it on a bare GPU machine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.models.tiny import BOS, EOS, TinyLlamaSpec, make_tokenizer_dir, vocab

FAMILIES = ("llama", "qwen3", "qwen3_moe", "deepseek_v3")
WEIGHTS = "model.safetensors"
CARD = "patchwheel-family.json"
ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
}


@dataclass(frozen=True)
class FamilySpec:
    """One tiny model: its family, depth, vocabulary, init scale and seed."""

    family: str
    num_layers: int = 4
    vocab_size: int = 512
    max_position_embeddings: int = 4096
    initializer_range: float = 0.1
    norm_jitter: float = 0.1  # norm weights are 1 + N(0, jitter): a skipped norm shows
    seed: int = 1234

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise VerifyError(
                f"unknown model family {self.family!r}: expected one of {', '.join(FAMILIES)}"
            )
        if self.num_layers < 2:
            raise VerifyError(
                f"{self.family}: num_layers must be >= 2 (DeepSeek-V3 needs a dense and an "
                f"MoE layer), got {self.num_layers}"
            )

    @property
    def tokenizer_spec(self) -> TinyLlamaSpec:
        """The spec the shared tokenizer and prompt generator read (vocabulary and seed)."""
        return TinyLlamaSpec(
            num_layers=self.num_layers,
            vocab_size=self.vocab_size,
            max_position_embeddings=self.max_position_embeddings,
            seed=self.seed,
        )


def parse_families(text: str) -> tuple[str, ...]:
    """``"llama,qwen3"`` -> ("llama", "qwen3"); ``"all"`` -> every family; refuse unknowns."""
    names = FAMILIES if text.strip() == "all" else tuple(n.strip() for n in text.split(","))
    names = tuple(n for n in names if n)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise VerifyError(
            f"--families {text!r}: unknown {', '.join(unknown) or '(empty)'}; "
            f"choose from {', '.join(FAMILIES)} (comma-separated) or 'all'"
        )
    return tuple(dict.fromkeys(names))


# --------------------------------------------------------------------------- configs


def _common(spec: FamilySpec) -> dict[str, Any]:
    table = vocab(spec.tokenizer_spec)
    return {
        "vocab_size": spec.vocab_size,
        "num_hidden_layers": spec.num_layers,
        "max_position_embeddings": spec.max_position_embeddings,
        "initializer_range": spec.initializer_range,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "bos_token_id": table[BOS],
        "eos_token_id": table[EOS],
        "pad_token_id": None,
        "hidden_act": "silu",
    }


def _llama(spec: FamilySpec) -> Any:
    from transformers import LlamaConfig

    cls: Any = LlamaConfig
    return cls(
        **_common(spec),
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
    )


def _qwen3(spec: FamilySpec) -> Any:
    from transformers import Qwen3Config

    cls: Any = Qwen3Config
    # head_dim is decoupled from hidden / heads in Qwen3 (64 x 4 heads = 256 != 128).
    return cls(
        **_common(spec),
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        attention_bias=False,
        use_sliding_window=False,
    )


def _qwen3_moe(spec: FamilySpec) -> Any:
    from transformers import Qwen3MoeConfig

    cls: Any = Qwen3MoeConfig
    return cls(
        **_common(spec),
        hidden_size=192,
        intermediate_size=256,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=32,  # = hidden / heads, so every implementation agrees on it
        num_experts=4,
        num_experts_per_tok=4,  # every expert active: no top-k choice to flip
        moe_intermediate_size=64,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        attention_bias=False,
        use_sliding_window=False,
    )


def _deepseek_v3(spec: FamilySpec) -> Any:
    from transformers import DeepseekV3Config

    cls: Any = DeepseekV3Config  # vLLM's keys (topk_method, ...) are no declared fields
    return cls(
        **_common(spec),
        hidden_size=256,
        intermediate_size=512,  # the dense first layer
        num_attention_heads=4,
        num_key_value_heads=4,  # the class default is 128; MLA ignores it, keep it honest
        q_lora_rank=128,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=64,
        v_head_dim=128,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=4,  # every expert active
        n_group=2,
        topk_group=2,  # every group kept
        moe_intermediate_size=64,
        first_k_dense_replace=1,
        moe_layer_freq=1,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
        topk_method="noaux_tc",  # without it vLLM has no e_score_correction_bias to load
        scoring_func="sigmoid",
        rope_interleave=True,
        num_nextn_predict_layers=0,  # no MTP layer weights in the checkpoint
        attention_bias=False,
    )


CONFIGS: dict[str, Callable[[FamilySpec], Any]] = {
    "llama": _llama,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek_v3,
}

# Keys the family's hub checkpoints carry that transformers 5 saves under another name
# (Qwen3MoeConfig keeps num_experts as num_local_experts): written as well, so a reader without
# the alias finds the same value instead of its own default (128 experts).
HUB_KEYS: dict[str, dict[str, str]] = {"qwen3_moe": {"num_experts": "num_local_experts"}}

# The config keys each family's check depends on (recorded in the card, checked on write).
FACTS: dict[str, dict[str, Any]] = {
    "llama": {"hidden_size": 128, "head_dim": 32},
    "qwen3": {"hidden_size": 128, "head_dim": 64},
    "qwen3_moe": {
        "hidden_size": 192,
        "num_experts": 4,
        "num_experts_per_tok": 4,
        "norm_topk_prob": True,
    },
    "deepseek_v3": {
        "hidden_size": 256,
        "kv_lora_rank": 512,
        "q_lora_rank": 128,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 64,
        "v_head_dim": 128,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 4,
        "n_group": 2,
        "topk_group": 2,
        "first_k_dense_replace": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "num_nextn_predict_layers": 0,
    },
}


def family_config(spec: FamilySpec) -> Any:
    """The transformers config of the spec's family (float32 on disk)."""
    config = CONFIGS[spec.family](spec)
    config.dtype = "float32"
    config.architectures = [ARCHITECTURES[spec.family]]
    return config


# --------------------------------------------------------------------------- weights


def tensor_seed(seed: int, name: str) -> int:
    """The generator seed of one checkpoint tensor: sha256 of (seed, name), 63 bits."""
    digest = hashlib.sha256(f"patchwheel-family:{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def draw_tensor(spec: FamilySpec, name: str, shape: tuple[int, ...]) -> Any:
    """One checkpoint tensor, a function of (seed, name, shape) only (float32)."""
    import torch

    generator = torch.Generator(device="cpu").manual_seed(tensor_seed(spec.seed, name))
    values = torch.randn(shape, generator=generator, dtype=torch.float32)
    if name.endswith("norm.weight"):
        return 1.0 + spec.norm_jitter * values
    return spec.initializer_range * values


def checkpoint_layout(config: Any, scratch: Path) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor ``save_pretrained`` writes for ``config``."""
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    auto: Any = AutoModelForCausalLM
    torch.manual_seed(0)  # the values are thrown away; only names and shapes count
    model = auto.from_config(config, dtype=torch.float32)
    model.save_pretrained(str(scratch), safe_serialization=True)
    layout: dict[str, tuple[int, ...]] = {}
    for path in sorted(scratch.glob("*.safetensors")):
        with safe_open(str(path), "pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open has no __iter__
                layout[key] = tuple(handle.get_slice(key).get_shape())
    return layout


def make_family_model(spec: FamilySpec, out_dir: Path) -> Path:
    """Write the spec's model (config, seeded safetensors, tokenizer, card) to out_dir.

    An existing directory whose card records the same spec and whose weights still hash to
    the card's sha256 is reused as it is.
    """
    from safetensors.torch import save_file

    if _is_current(spec, out_dir):
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in [*out_dir.glob("*.safetensors*"), out_dir / CARD]:
        old.unlink(missing_ok=True)
    config = family_config(spec)
    with tempfile.TemporaryDirectory(prefix="patchwheel-family-") as tmp:
        layout = checkpoint_layout(config, Path(tmp))
        shutil.copyfile(Path(tmp) / "config.json", out_dir / "config.json")
        generation = Path(tmp) / "generation_config.json"
        if generation.is_file():
            shutil.copyfile(generation, out_dir / "generation_config.json")
    tensors = {name: draw_tensor(spec, name, shape) for name, shape in sorted(layout.items())}
    save_file(tensors, str(out_dir / WEIGHTS), metadata={"format": "pt"})
    make_tokenizer_dir(spec.tokenizer_spec, out_dir)
    written: dict[str, Any] = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
    for key, source in HUB_KEYS.get(spec.family, {}).items():
        written.setdefault(key, written.get(source))
    check_config(spec, written)
    (out_dir / "config.json").write_text(
        json.dumps(written, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    card = {
        "spec": asdict(spec),
        "architecture": ARCHITECTURES[spec.family],
        "weights_sha256": _sha256(out_dir / WEIGHTS),
        "num_tensors": len(tensors),
        "num_parameters": sum(int(t.numel()) for t in tensors.values()),
        "config": {k: written.get(k) for k in sorted(FACTS[spec.family])},
    }
    (out_dir / CARD).write_text(json.dumps(card, indent=2, sort_keys=True) + "\n", "utf-8")
    return out_dir


def read_card(model_dir: Path) -> dict[str, Any]:
    """The family card of a model directory (VerifyError when missing or unreadable)."""
    path = model_dir / CARD
    try:
        card: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VerifyError(
            f"{path}: no readable family card ({exc}); regenerate the model with "
            "patchwheel.verify.models.families.make_family_model"
        ) from exc
    return card


def check_config(spec: FamilySpec, written: dict[str, Any]) -> None:
    """Refuse a config.json that lost a fact the family's check depends on."""
    wrong = {
        key: (written.get(key), want)
        for key, want in FACTS[spec.family].items()
        if written.get(key) != want
    }
    if written.get("num_hidden_layers") != spec.num_layers:
        wrong["num_hidden_layers"] = (written.get("num_hidden_layers"), spec.num_layers)
    if wrong:
        detail = ", ".join(f"{k}={got!r} (want {want!r})" for k, (got, want) in wrong.items())
        raise VerifyError(
            f"{spec.family}: the config.json transformers wrote lost facts the check depends "
            f"on: {detail} (a transformers release that renames these keys needs HUB_KEYS)"
        )


def _is_current(spec: FamilySpec, out_dir: Path) -> bool:
    if not (out_dir / CARD).is_file() or not (out_dir / WEIGHTS).is_file():
        return False
    try:
        card = read_card(out_dir)
    except VerifyError:
        return False
    return card.get("spec") == asdict(spec) and card.get("weights_sha256") == _sha256(
        out_dir / WEIGHTS
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
