"""What the served user's path did: each server's run, each stage's time, every check."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.oracles.compare import TensorCheck, max_error_per_layer


@dataclass(frozen=True)
class GeneratorFiles:
    """The generator generation's user-path output of the same model: its ``data_<i>.pt``
    folder, the model it was made from, and its layer ids (speculators 0.3.0's)."""

    data_dir: Path
    model_dir: Path
    layer_ids: tuple[int, ...]


@dataclass
class ConnectorResult:
    """One server: its command, how long it took, the files it gave and their checks."""

    name: str
    backend: str
    kv_transfer_config: dict[str, Any]
    command: list[str]
    log: str
    ready_s: float | None = None
    generate_s: float | None = None
    files: int = 0
    stored: str | None = None
    checks: list[TensorCheck] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        failed = [c.describe() for c in self.checks if not c.ok]
        return {
            **{k: v for k, v in asdict(self).items() if k != "checks"},
            "vs_transformers": {
                "checks": len(self.checks),
                "failed": failed,
                "max_abs_error_per_layer": {
                    str(k): v for k, v in max_error_per_layer(self.checks).items()
                },
            },
        }


@dataclass
class ServedResult:
    """What the user's path did, stage by stage, and what its outputs matched."""

    status: str = "not run"  # "passed", "failed" (a stage failed) or "mismatch"
    stage_seconds: dict[str, float] = field(default_factory=dict)
    layer_ids: list[int] = field(default_factory=list)
    decoder_layers: list[int] = field(default_factory=list)
    dtype: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    scale_out_flag: bool | None = None
    connectors: list[ConnectorResult] = field(default_factory=list)
    rows: int = 0
    preprocessing_matches_template: bool | None = None
    pipeline: dict[str, Any] | None = None
    generator: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    error: str | None = None
    wall_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k != "connectors"},
            "connectors": [c.to_json() for c in self.connectors],
        }

    @property
    def checks(self) -> list[TensorCheck]:
        return [c for run in self.connectors for c in run.checks]


class ServedPathFailed(VerifyError):
    """The user's path failed; carries what it did up to there."""

    def __init__(self, result: ServedResult, message: str) -> None:
        super().__init__(message)
        self.result = result
