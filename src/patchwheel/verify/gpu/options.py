"""What one GPU verification does: its options, from ``patchwheel gpu`` or
``python -m patchwheel.verify.gpu`` arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from patchwheel.errors import VerifyError
from patchwheel.portable import Roots, roots
from patchwheel.verify.gpu.report import REPORT_NAME
from patchwheel.verify.models.families import FAMILIES, parse_families
from patchwheel.verify.oracles.compare import RTOL
from patchwheel.workspace import Workspace

STAGES = ("correctness", "training", "throughput", "userjob")
DEFAULT_STAGES = ("correctness", "training", "throughput")


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
    baseline_modes: tuple[str, ...] = ("eager", "default")
    max_num_batched_tokens: int = 16384
    families: tuple[str, ...] = FAMILIES
    stages: tuple[str, ...] = DEFAULT_STAGES
    extraction_eager: bool = False
    profile: bool = False
    baseline_speculators: Path | None = None
    train_epochs: int = 4
    speculators_scripts: Path | None = None
    generator_report: Path | None = None

    def report_roots(self) -> Roots:
        """The folders a report names by name, never by this machine's path: the checkout
        (relative), the wheelhouse, the work folder, the manifest's folder, speculators' scripts."""
        checkout = Path(__file__).resolve().parents[4]  # src/patchwheel/verify/gpu/options.py
        return roots(
            checkout,
            [
                (self.wheelhouse, "$WHEELHOUSE"),
                (self.work_dir, "$WORK_DIR"),
                (self.manifest_dir, "$MANIFEST_DIR"),
                (self.speculators_scripts, "$SPECULATORS_SCRIPTS"),
            ],
        )


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
    parser.add_argument(
        "--tp", type=int, default=1, help="tensor-parallel size of every check and timing"
    )
    parser.add_argument(
        "--families",
        default="all",
        help=f"model families to check, comma-separated ({', '.join(FAMILIES)}) or all",
    )
    parser.add_argument(
        "--stages",
        default=None,
        help="what this call runs, comma-separated: correctness, training, throughput, userjob "
        "(default: the first three; userjob with --speculators-scripts); a report at the same "
        "path from the same build keeps the other stages' results",
    )
    parser.add_argument(
        "--speculators-scripts",
        type=Path,
        help="speculators' own scripts/ folder at its tag (v0.3.0: data_generation_offline.py, "
        "build_vocab_mapping.py, train.py; sha256-checked): the userjob stage runs them as a "
        "user does, with INSTALL.txt's environment only",
    )
    parser.add_argument(
        "--extraction-eager",
        action="store_true",
        help="check the extraction with enforce_eager=True (default: compiled, its GPU default)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile one more pass of each throughput side (the driver, start-up phases)",
    )
    parser.add_argument(
        "--baseline-speculators",
        type=Path,
        help="a speculators wheel to time and profile as 'before' (e.g. the series without "
        "its speed patches)",
    )
    parser.add_argument("--train-epochs", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(RTOL))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--baselines",
        default="eager,default",
        help="vLLM LLM.generate modes to time: eager (same mode as the extraction) and/or "
        "default (torch.compile + CUDA graphs)",
    )
    parser.add_argument(
        "--generator-report",
        type=Path,
        help="a served target's throughput: the generator target's verify-gpu.json of this "
        "machine and vLLM wheel, whose compiled prefill is the reference and whose figures are "
        "set beside (default: measure the prefill side here)",
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
        tp=_positive("--tp", args.tp),
        prompts=args.prompts,
        prompt_len=args.prompt_len,
        dtype=args.dtype,
        repeats=args.repeats,
        baseline_modes=_modes(args.baselines),
        families=parse_families(args.families),
        stages=_stages(args.stages, args.speculators_scripts),
        extraction_eager=args.extraction_eager,
        profile=args.profile,
        baseline_speculators=_wheel(args.baseline_speculators),
        train_epochs=_positive("--train-epochs", args.train_epochs),
        speculators_scripts=_scripts(args.speculators_scripts),
        generator_report=args.generator_report,
    )


def _positive(name: str, value: int) -> int:
    if value < 1:
        raise VerifyError(f"{name} {value}: must be at least 1")
    return value


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    wrong = [m for m in modes if m not in ("eager", "default")]
    if wrong or not modes:
        raise VerifyError(f"--baselines {text!r}: choose from eager, default (comma-separated)")
    return modes


def _stages(text: str | None, scripts: Path | None) -> tuple[str, ...]:
    if text is None:
        return (*DEFAULT_STAGES, "userjob") if scripts is not None else DEFAULT_STAGES
    stages = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    wrong = [s for s in stages if s not in STAGES]
    if wrong or not stages:
        raise VerifyError(
            f"--stages {text!r}: unknown {', '.join(wrong) or '(empty)'}; choose from "
            f"{', '.join(STAGES)} (comma-separated)"
        )
    if "userjob" in stages and scripts is None:
        raise VerifyError(
            "--stages userjob needs --speculators-scripts DIR (speculators' scripts/ at its "
            "git tag: they are not in its sdist)"
        )
    return stages


def _scripts(path: Path | None) -> Path | None:
    if path is None:
        return None
    if not path.is_dir():
        raise VerifyError(f"--speculators-scripts {path}: not a folder")
    return path.resolve()


def _wheel(path: Path | None) -> Path | None:
    if path is None:
        return None
    if not path.is_file() or not path.name.endswith(".whl") or "speculators" not in path.name:
        raise VerifyError(
            f"--baseline-speculators {path}: not a speculators wheel file (build the series "
            "without its speed patches with `nox -s build` and pass the .whl)"
        )
    return path.resolve()
