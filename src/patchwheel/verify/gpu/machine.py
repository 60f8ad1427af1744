"""The GPU machine: name, compute capability, driver and CUDA of the visible GPUs; a clear
refusal without one.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from patchwheel.errors import VerifyError

# --------------------------------------------------------------------------- the machine


def gpu_facts(tp: int) -> dict[str, Any]:
    """Name, compute capability, driver and CUDA of the visible GPUs; refuse without one."""
    try:
        import torch
    except ImportError as exc:
        raise VerifyError(
            "no torch in this Python: run `nox -s gpu` with the GPU machine's own python "
            "(or install a CUDA torch); on a CPU machine use `nox -s verify`"
        ) from exc
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise VerifyError(
            "no CUDA GPU is visible (torch.cuda.is_available() is False): `nox -s gpu` needs "
            "one; on a machine without a GPU run `nox -s verify` (CPU extraction) instead"
        )
    count = torch.cuda.device_count()
    if count < tp:
        raise VerifyError(f"--tp {tp} needs {tp} GPUs, this machine shows {count}")
    major, minor = torch.cuda.get_device_capability(0)
    return {
        "name": torch.cuda.get_device_name(0),
        "count": count,
        "compute_capability": f"{major}.{minor}",
        "sm": f"sm_{major}{minor}",
        "memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
        "driver": _driver_version(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None
