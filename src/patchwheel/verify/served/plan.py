"""What a served verification serves and asks: the model, the layers, the connectors, the data.

The defaults are the CPU run of ``nox -s verify`` for a served target: the 8-layer tiny chat
Llama of the generator generation's user path (same seed, same weights, same conversations:
``verify.models.chat``), hidden states of vLLM layer ids 3, 5, 6 and the last (8), served once with
vLLM's ``ExampleHiddenStatesConnector`` (the files speculators' trainer reads) and once with
hs-connectors' FP8 connector.

Layer ids. vLLM's id *k* is the residual stream after decoder layer *k - 1* (id 0: the
embeddings; ``_maybe_add_hidden_state(aux, idx + 1, …)`` after layer ``idx``); speculators
0.3.0's layer *i* is the stream after layer *i*. The ids 3, 5, 6 (given to the launcher and to
the trainer, as speculators' docs require for custom ids) and the last layer, which the
launcher appends, are the generator's default layers 2, 4, 5, 7 of the same model: each
generation's files are an oracle for the other's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from patchwheel.errors import VerifyError
from patchwheel.verify.models.tiny import TinyLlamaSpec


@dataclass(frozen=True)
class ConnectorRun:
    """One ``vllm serve`` of the plan: which hs-connectors backend gives its
    ``--kv-transfer-config`` (``file``: vLLM's ExampleHiddenStatesConnector; ``fp8``:
    hs-connectors' FP8HiddenStatesConnector), and how it is checked."""

    name: str
    backend: str
    # speculators' training side (data loader, draft forward; trainer on a GPU) reads these files
    train: bool = False
    # generate-offline-data --validate-outputs (speculators' own check of each file). Not with
    # the FP8 connector: speculators' check calls torch.aminmax on the float8 tensor, which has
    # no CPU kernel ("aminmax_cpu" not implemented for 'Float8_e4m3fn').
    validate: bool = True
    enforce_eager: bool = False  # --enforce-eager: no compilation (start-up time in CI)
    # kv-transfer-config keys replaced after hs-connectors built it (a test's misspelled name)
    override: tuple[tuple[str, str], ...] = ()


DEFAULT_CONNECTORS = (
    ConnectorRun("example", "file", train=True),
    ConnectorRun("fp8", "fp8", validate=False, enforce_eager=True),
)


@dataclass(frozen=True)
class ServedPlan:
    """Settings of one served verification (defaults: the CPU run)."""

    spec: TinyLlamaSpec = field(default_factory=lambda: TinyLlamaSpec(num_layers=8))
    # "llama": the chat Llama above (the generator generation's user-path model); another of
    # verify.families' families: its seeded model with spec's depth, vocabulary and seed.
    family: str = "llama"
    target_layer_ids: tuple[int, ...] = (3, 5, 6)  # the launcher appends the last layer
    # float32: transformers agrees to ~1e-5 (bfloat16 only to a few of its ulps); a user's
    # default on CPU ("auto") would silently serve this float32 checkpoint in bfloat16.
    dtype: str = "float32"
    max_model_len: int = 2048
    seq_length: int = 512  # prepare-data --seq-length and the trainer's --total-seq-len
    concurrency: int = 4
    draft_vocab_size: int = 64
    connectors: tuple[ConnectorRun, ...] = DEFAULT_CONNECTORS
    kv_cache_gib: int = 1  # VLLM_CPU_KVCACHE_SPACE
    ready_timeout_s: float = 900.0
    step_timeout_s: float = 900.0
    # speculators' fused (Triton) loss needs a GPU; its "eager" loss is its documented
    # alternative. On a GPU the default ("fused") is kept.
    loss_implementation: str | None = "eager"
    train_steps: int = 0  # 0: one forward pass (CPU); N: N optimizer steps of its trainer
    serve_args: tuple[str, ...] = ()  # more vLLM arguments (a GPU run: tensor parallel)

    def __post_init__(self) -> None:
        layers = self.spec.num_layers
        ids = self.target_layer_ids
        if not ids or min(ids) < 1 or max(ids) >= layers or len(set(ids)) != len(ids):
            raise VerifyError(
                f"target layer ids {ids} must be distinct and in [1, {layers - 1}] (vLLM's id "
                "0 is the embeddings, which the reference does not hook; the last layer is "
                "appended by the launcher)"
            )
        if not self.connectors or not any(c.train for c in self.connectors):
            raise VerifyError("a served plan needs a connector whose files speculators trains on")
        if len({c.name for c in self.connectors}) != len(self.connectors):
            raise VerifyError("two connector runs of a served plan have the same name")

    @property
    def served_layer_ids(self) -> list[int]:
        """vLLM's layer ids the server extracts: the target ids, then the last layer."""
        return [*self.target_layer_ids, self.spec.num_layers]

    @property
    def decoder_layers(self) -> list[int]:
        """The decoder layers whose outputs those ids are (the reference's layers)."""
        return [i - 1 for i in self.served_layer_ids]

    def train_args(self, model_dir: str, data: str, states: str, save: str) -> list[str]:
        """``speculators train`` flags of the user's run on the files (the layer ids given
        again, as speculators' docs require for custom ids)."""
        args = [
            "--verifier-name-or-path", model_dir,
            "--data-path", data,
            "--hidden-states-path", states,
            "--speculator-type", "eagle3",
            "--target-layer-ids", *map(str, self.target_layer_ids),
            "--draft-vocab-size", str(self.draft_vocab_size),
            "--total-seq-len", str(self.seq_length),
            "--on-missing", "raise",
            "--num-workers", "0",
            "--save-path", save,
            "--log-dir", save + "/logs",
            "--seed", "0",
        ]  # fmt: skip
        if self.loss_implementation:
            args += ["--loss-implementation", self.loss_implementation]
        if self.train_steps:
            # --max-steps ends the run (and sets the LR schedule's length); --epochs only has to
            # allow that many steps. "--epochs 1" stopped the 2026-12-04 H200 run after one
            # pass of 4 batches of its 12 steps, so no batch was seen twice.
            epochs = str(self.train_steps)
            args += ["--max-steps", str(self.train_steps), "--epochs", epochs, "--log-freq", "1"]
        return args
