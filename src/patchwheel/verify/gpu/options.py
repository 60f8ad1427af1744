"""What one GPU verification does: its options, from ``patchwheel gpu`` or
``python -m patchwheel.verify.gpu`` arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from patchwheel.verify.compare import RTOL
from patchwheel.verify.gpu.report import REPORT_NAME
from patchwheel.workspace import Workspace


@dataclass(frozen=True)
class GpuOptions:
    """What one GPU verification does."""

    manifest_dir: Path
    work_dir: Path
    report_path: Path
    wheelhouse: Path | None = None
    use_system_torch: bool = False
    model: Path | None = None
    tp: int = 1
    prompts: int = 256
    prompt_len: int = 1024
    dtype: str = "bfloat16"
    repeats: int = 2
    throughput: bool = True
    baseline_modes: tuple[str, ...] = ("eager", "default")
    tp_throughput: bool = True
    max_num_batched_tokens: int = 16384


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``patchwheel gpu`` / ``python -m patchwheel.verify.gpu``."""
    parser.add_argument("--target", help="target name (default: the default target)")
    parser.add_argument("--build-dir", type=Path, default=None, help="default: ./build")
    parser.add_argument("--manifest-dir", type=Path, help="where manifest.json is")
    parser.add_argument("--wheelhouse", type=Path, help="offline wheelhouse (nox -s wheelhouse)")
    parser.add_argument(
        "--use-system-torch",
        action="store_true",
        help="install beside this python's own torch (a folder on PYTHONPATH), not in a venv",
    )
    parser.add_argument("--model", type=Path, help="throughput model (default: generated)")
    parser.add_argument("--tp", type=int, default=1, help="also verify at this TP size")
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(RTOL))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-throughput", action="store_true")
    parser.add_argument(
        "--baselines",
        default="eager,default",
        help="vLLM LLM.generate modes to time: eager (same mode as the extraction) and/or "
        "default (torch.compile + CUDA graphs)",
    )
    parser.add_argument(
        "--no-tp-throughput",
        action="store_true",
        help="time extraction at --tp only for correctness",
    )
    parser.add_argument("--report", type=Path, help="default: build/<target>/verify-gpu.json")
    parser.add_argument("--work-dir", type=Path, help="default: build/.work/<target>/verify-gpu")


def options_from(args: argparse.Namespace, workspace: Workspace) -> GpuOptions:
    """GpuOptions from parsed arguments; paths default to ``workspace`` (``--build-dir`` aside)."""
    target = args.target
    if target is None:
        # Only without --target, so a run that names its target imports nothing of the build
        # side (target.toml's model needs `packaging`).
        from patchwheel.config.targets import default_target_name

        target = default_target_name(workspace.patches)
    if args.build_dir is not None:
        workspace = dataclasses.replace(workspace, build=args.build_dir)
    target_dir = workspace.target_dir(target)
    return GpuOptions(
        manifest_dir=args.manifest_dir or target_dir,
        work_dir=args.work_dir or workspace.work_dir(target, "verify-gpu"),
        report_path=args.report or target_dir / REPORT_NAME,
        wheelhouse=args.wheelhouse,
        use_system_torch=args.use_system_torch,
        model=args.model,
        tp=args.tp,
        prompts=args.prompts,
        prompt_len=args.prompt_len,
        dtype=args.dtype,
        repeats=args.repeats,
        throughput=not args.no_throughput,
        baseline_modes=tuple(m for m in args.baselines.split(",") if m),
        tp_throughput=not args.no_tp_throughput,
    )
