"""speculators' own scripts, run as a user runs them: the ``userjob`` stage.

speculators v0.3.0 ships its pipeline as scripts in its git repository (``scripts/``), not in
its sdist or wheel; ``--speculators-scripts DIR`` gives them (``git show v0.3.0:scripts/…``;
each file's sha256 is checked against the tag's). In a folder of its own, with nothing but the
environment INSTALL.txt gives users (and the import trace, which records and changes
nothing), the stage runs, unmodified:

1. ``data_generation_offline.py`` on the user-path model (a tiny Llama with a chat template,
   ``verify/models/chat.py``) and ShareGPT-style conversations: preprocessing, the generator at its
   defaults (``--tensor-parallel-size`` left to the script: the GPU count), ``data_<i>.pt``,
   ``data_config.json``, ``token_freq.pt``;
2. ``build_vocab_mapping.py``: ``d2t.npy``, ``t2d.npy``;
3. ``train.py`` for one epoch on those files: a checkpoint.

Each step's exit status, time and outputs go into the report's ``user_job``; a step that
fails, or leaves its outputs missing, fails the stage with the log's tail.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.userpath import UserPathPlan, prepare_inputs
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.models.chat import CONVERSATIONS

TAG = "v0.3.0"
TAG_COMMIT = "be6e86e79eee8b2d363399a767194e53f5407331"
# sha256 of each script at speculators' tag v0.3.0 (git show v0.3.0:scripts/NAME | sha256sum).
SCRIPTS = {
    "data_generation_offline.py": (
        "1d9ca21ab427eaeb4a0a963dc8412ea007360121dc46281d7be67016816d3b5b"
    ),
    "build_vocab_mapping.py": "5c32c1d112a5ba2ac6d6c7ae40335bcf856b7b586511299b41bd5f8ccf12618f",
    "train.py": "6aac648ba8eee5d7d4daf0cb3514e7d52a5c0d4023023985ecae4fc23af76cf6",
}
DRAFT_VOCAB = 64
TIMEOUT_S = {"data_generation_offline.py": 900, "build_vocab_mapping.py": 180, "train.py": 900}


def check_scripts(folder: Path) -> dict[str, Path]:
    """The three scripts in ``folder``, each byte for byte the tag's; else VerifyError."""
    found = {}
    for name, sha256 in SCRIPTS.items():
        path = folder / name
        try:
            actual = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise VerifyError(
                f"--speculators-scripts {folder}: no {name} ({exc}); give the folder of "
                f"`git -C speculators archive {TAG} scripts` (speculators' git tag {TAG})"
            ) from exc
        if actual != sha256:
            raise VerifyError(
                f"{path}: sha256 {actual}, but speculators {TAG}'s {name} has {sha256}: the "
                "stage runs speculators' scripts exactly as the tag has them"
            )
        found[name] = path
    return found


def run_user_job(options: GpuOptions, runtime: Runtime, console: Console) -> dict[str, Any]:
    """Run the three scripts as a user would; the report's ``user_job`` record."""
    if options.speculators_scripts is None:
        raise VerifyError("the userjob stage needs --speculators-scripts DIR")
    scripts = check_scripts(options.speculators_scripts)
    work = options.work_dir / "user-job"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    plan = UserPathPlan()
    with console.status("making the user-path model and conversations"):
        model_dir, dataset = prepare_inputs(plan, work / "inputs")
    env = runtime.user_env()
    data = work / "training_data"
    vocab = work / "vocab"
    record: dict[str, Any] = {
        "scripts": str(options.speculators_scripts),
        "tag": f"{TAG} ({TAG_COMMIT[:10]})",
        "environment_source": runtime.allowed.user.source if runtime.allowed else "?",
        "model": "user-path tiny Llama (8 layers, chat template)",
        "conversations": len(CONVERSATIONS),
        "steps": [],
        "passed": False,
    }
    steps: list[tuple[str, list[str], Any]] = [
        (
            "data_generation_offline.py",
            [
                "--target-model-path", str(model_dir),
                "--train-data-path", str(dataset),
                "--output-dir", str(data),
                "--seq-length", str(plan.seq_length),
                "--token-freq-path", str(work / "token_freq.pt"),
                "--hf-cache-dir", str(work / "hf-cache"),
            ],
            lambda: _data_files(data),
        ),
        (
            "build_vocab_mapping.py",
            [
                "--token-freq-path", str(work / "token_freq.pt"),
                "--draft-vocab-size", str(DRAFT_VOCAB),
                "--target-model-path", str(model_dir),
                "--output-path", str(vocab),
            ],
            lambda: _files(vocab, ("d2t.npy", "t2d.npy")),
        ),
        (
            "train.py",
            [
                "--verifier-name-or-path", str(model_dir),
                "--data-path", str(data),
                "--save-path", str(work / "checkpoints"),
                "--epochs", "1",
                "--total-seq-len", str(plan.seq_length),
                "--d2t-path", str(vocab / "d2t.npy"),
                "--t2d-path", str(vocab / "t2d.npy"),
                "--log-dir", str(work / "logs"),
            ],
            lambda: _checkpoint(work / "checkpoints"),
        ),
    ]  # fmt: skip
    for name, args, outputs in steps:
        log = work / f"{name}.log"
        started = time.monotonic()
        with console.status(f"speculators' {name} (as a user runs it)"), log.open("w") as fh:
            try:
                proc = subprocess.run(
                    [runtime.python, str(scripts[name]), *args],
                    cwd=work,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    env=env,
                    timeout=TIMEOUT_S[name],
                    check=False,
                )
                status = proc.returncode
            except subprocess.TimeoutExpired:
                status = -1
        seconds = time.monotonic() - started
        step: dict[str, Any] = {"script": name, "exit": status, "seconds": round(seconds, 1)}
        record["steps"].append(step)
        if status != 0:
            tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-25:])
            record["error"] = f"{name} exited {status} (log {log}):\n{tail}"
            raise _Failed(record)
        try:
            step["result"] = outputs()
        except VerifyError as exc:
            record["error"] = f"{name}: {exc}"
            raise _Failed(record) from exc
        console.print(f"speculators' {name}: {step['result']} ({seconds:.0f} s)")
    record["passed"] = True
    return record


class _Failed(VerifyError):
    """A step failed; carries the record so far."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(str(record.get("error")))
        self.record = record


def failed_record(exc: VerifyError) -> dict[str, Any] | None:
    """The record a failed run made before failing, if any."""
    return exc.record if isinstance(exc, _Failed) else None


def _data_files(data: Path) -> str:
    files = sorted(data.glob("data_*.pt"))
    if len(files) != len(CONVERSATIONS):
        raise VerifyError(
            f"{data}: {len(files)} data_<i>.pt files for {len(CONVERSATIONS)} conversations"
        )
    if not (data / "data_config.json").is_file():
        raise VerifyError(f"{data}: no data_config.json")
    size = sum(f.stat().st_size for f in files)
    return f"{len(files)} files ({size / 1e6:.1f} MB) and data_config.json"


def _files(folder: Path, names: tuple[str, ...]) -> str:
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise VerifyError(f"{folder}: {', '.join(missing)} missing")
    return ", ".join(names)


def _checkpoint(folder: Path) -> str:
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    if not files:
        raise VerifyError(f"{folder}: no checkpoint written")
    return f"checkpoint: {len(files)} files"
