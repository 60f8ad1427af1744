"""A few optimizer steps of speculators' own EAGLE-3 trainer on the files this session
extracted (the Llama family's extraction at the session's TP size; extracted here when no
correctness stage ran with this ``--work-dir``), in the wheels' python (``gpu/train_draft.py``);
loss before and after. Fails when the loss is not finite or did not decrease.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from rich.console import Console

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.gpu.correctness import extract_family
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.payloads import script

TRAIN_SCRIPT = script("train_draft")
FAMILY = "llama"  # speculators' EAGLE-3 draft is a Llama decoder layer on a Llama verifier
TIMEOUT_S = 600


def train_draft(options: GpuOptions, runtime: Runtime, console: Console) -> dict[str, Any]:
    """Run the trainer on the extracted files; its result (``passed``: finite, decreasing)."""
    family = options.work_dir / "families" / FAMILY
    extraction = family / f"extraction-tp{options.tp}"
    if not (extraction / "hidden_states.safetensors").is_file():
        # No correctness stage on this machine yet (another call, a fresh machine): extract.
        extract_family(options, runtime, FAMILY, options.tp, console)
    work = options.work_dir / "training"
    if work.exists():
        shutil.rmtree(work)
    out = options.work_dir / "training.json"
    out.unlink(missing_ok=True)
    log = options.work_dir / "training.log"
    cmd = [
        runtime.python,
        str(TRAIN_SCRIPT),
        "--extraction",
        str(extraction),
        "--verifier",
        str(family / "model"),
        "--work",
        str(work),
        "--out",
        str(out),
        "--device",
        "cuda",
        "--epochs",
        str(options.train_epochs),
    ]
    with console.status("training the EAGLE-3 draft on the extracted files"), log.open("w") as fh:
        try:
            subprocess.run(
                cmd,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=runtime.env,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise VerifyError(f"training did not finish in {TIMEOUT_S} s (log {log})") from exc
    if not out.is_file():
        tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-25:])
        raise VerifyError(f"training failed before it wrote a result (log {log}):\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    keep = (
        "device_name",
        "versions",
        "attention",
        "files",
        "draft_parameters",
        "epochs",
        "steps",
        "lr",
        "train_loss",
        "loss_before",
        "loss_after",
        "loss_finite",
        "loss_decreased",
        "passed",
        "seconds",
    )
    record = {k: result.get(k) for k in keep}
    record["family"] = FAMILY
    record["extraction"] = f"families/{FAMILY}/extraction-tp{options.tp}"
    console.print(
        f"training: {record['steps']} steps, loss {record['loss_before']:.4g} -> "
        f"{record['loss_after']:.4g}"
    )
    return record
