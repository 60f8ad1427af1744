"""The user's path of the served generation, in the verify venv, checked stage by stage.

What a user of speculators >= 0.5 runs, with the venv's own commands:

1. ``vllm serve`` of the target model with vLLM's ``extract_hidden_states`` method and a KV
   connector (:mod:`.launch`, as speculators' launcher builds the command; one server per
   connector of the plan, each on a free loopback port, stopped however the stage ends);
2. ``python -m speculators prepare-data`` over a ShareGPT-style chat dataset, rendering every
   conversation through the server (``--render-endpoint``), with token frequencies;
3. ``python -m speculators generate-offline-data`` against the server: one
   ``hs_<i>.safetensors`` per dataset row;
4. speculators' training side on the files (:mod:`.pipeline`, its ``speculators train``
   objects: config, vocabulary mapping, EAGLE-3 draft, data loader, a forward pass; on a GPU
   its trainer).

Then, here: the rows against the chat template (one per assistant turn), every file of every
connector against transformers (:mod:`.files`), and, given the generator generation's files of
the same model, those against the served ones. A stage that fails names itself, the command and
what the server's log says (a worker's exception, with the vLLM frame that raised it).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.models.chat import (
    expected_turn_rows,
    sharegpt_records,
    write_chat_tokenizer,
    write_sharegpt,
)
from patchwheel.verify.models.families import FamilySpec, make_family_model
from patchwheel.verify.models.tiny import make_tiny_llama
from patchwheel.verify.oracles.compare import max_error_per_layer
from patchwheel.verify.payloads import script
from patchwheel.verify.served.files import (
    check_against_generator,
    check_against_transformers,
    model_digest,
    read_state_files,
)
from patchwheel.verify.served.launch import venv_serving
from patchwheel.verify.served.plan import ServedPlan
from patchwheel.verify.served.results import GeneratorFiles, ServedPathFailed, ServedResult
from patchwheel.verify.served.steps import run_step, serve_and_generate

PIPELINE_SCRIPT = script("served_pipeline")


def prepare_inputs(plan: ServedPlan, work: Path) -> tuple[Path, Path]:
    """The chat model and the ShareGPT-style dataset (the generator's user path's own; for
    another family, its seeded model with the same chat tokenizer)."""
    if plan.family == "llama":
        model_dir = make_tiny_llama(plan.spec, work / "chat-model")
    else:
        spec = FamilySpec(
            plan.family,
            num_layers=plan.spec.num_layers,
            vocab_size=plan.spec.vocab_size,
            max_position_embeddings=plan.spec.max_position_embeddings,
            seed=plan.spec.seed,
        )
        model_dir = make_family_model(spec, work / "chat-model")
    write_chat_tokenizer(model_dir, plan.spec.vocab_size, plan.spec.max_position_embeddings)
    dataset = write_sharegpt(sharegpt_records(plan.spec.vocab_size), work / "sharegpt.json")
    return model_dir, dataset


def _pipeline(
    python: Path, plan: ServedPlan, paths: dict[str, Path], states: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """speculators' training side on one connector's files (served_pipeline.py in the venv)."""
    out = paths["work"] / "pipeline"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    argv = plan.train_args(
        str(paths["model"]), str(paths["prepared"]), str(states), str(out / "save")
    )
    request = out / "request.json"
    mode = "train" if plan.train_steps else "forward"
    request.write_text(json.dumps({"argv": argv, "mode": mode}), encoding="utf-8")
    script = out / PIPELINE_SCRIPT.name
    shutil.copyfile(PIPELINE_SCRIPT, script)
    log = out / "pipeline.log"
    try:
        run_step(
            [str(python), str(script), str(request), str(out)],
            log,
            env=env,
            timeout_s=plan.step_timeout_s,
            what="speculators' training side (served_pipeline.py)",
        )
    except VerifyError:
        if not (out / "result.json").is_file():
            raise
    data: dict[str, Any] = json.loads((out / "result.json").read_text(encoding="utf-8"))
    data["argv"] = argv
    data["log"] = str(log)
    return data


def run_served_path(
    python: Path,
    plan: ServedPlan,
    work: Path,
    *,
    env: Mapping[str, str],
    generator: GeneratorFiles | None = None,
) -> ServedResult:
    """The user's path with the venv of ``python``; VerifyError (a :class:`ServedPathFailed`
    carrying what was done) when a stage fails or an output is wrong."""
    started = time.monotonic()
    result = ServedResult(
        layer_ids=plan.served_layer_ids, decoder_layers=plan.decoder_layers, dtype=plan.dtype
    )
    try:
        _run(python, plan, work, env, generator, result)
    except ServedPathFailed:
        raise
    except VerifyError as exc:
        result.status = "failed"
        result.error = str(exc)
        result.wall_s = round(time.monotonic() - started, 2)
        raise ServedPathFailed(result, str(exc)) from exc
    result.wall_s = round(time.monotonic() - started, 2)
    return result


def _run(
    python: Path,
    plan: ServedPlan,
    work: Path,
    env: Mapping[str, str],
    generator: GeneratorFiles | None,
    result: ServedResult,
) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    model, dataset = prepare_inputs(plan, work)
    paths = {
        "work": work,
        "model": model,
        "dataset": dataset,
        "prepared": work / "prepared",
        "states": work / "states",
    }
    staging = {run.backend: work / f"server-{run.name}" for run in plan.connectors}
    serving = venv_serving(python, staging, env=env, log=work / "connectors.log")
    result.versions = serving.versions
    result.scale_out_flag = serving.scale_out_flag
    trained = next(run for run in plan.connectors if run.train)
    serve_and_generate(python, plan, serving, paths, env=env, result=result)
    began = time.monotonic()
    result.pipeline = _pipeline(python, plan, paths, paths["states"] / trained.name, env)
    result.stage_seconds["pipeline"] = round(time.monotonic() - began, 2)
    if result.pipeline.get("status") != "passed":
        failure = result.pipeline.get("failure") or {}
        result.failure = failure
        frame = failure.get("speculators_frame")
        raise VerifyError(
            f"speculators' training side failed at stage {failure.get('stage')}: "
            f"{failure.get('call')} raised {failure.get('error')}"
            + (f" (innermost speculators frame: {frame})" if frame else "")
            + f". Log: {result.pipeline.get('log')}"
        )
    _check(plan, paths, generator, result)


def _check(
    plan: ServedPlan, paths: dict[str, Path], generator: GeneratorFiles | None, result: ServedResult
) -> None:
    began = time.monotonic()
    pipeline = result.pipeline or {}
    rows: list[list[int]] = pipeline.get("rows", [])
    result.rows = len(rows)
    got = sorted(zip((len(r) for r in rows), pipeline.get("loss_mask_tokens", []), strict=True))
    result.preprocessing_matches_template = got == expected_turn_rows()
    problems: list[str] = []
    if not result.preprocessing_matches_template:
        problems.append("prepare-data: rows or loss masks differ from the chat template's")
    files_by_run = {}
    runs = {run.name: run for run in plan.connectors}
    for record in result.connectors:
        run = runs[record.name]
        files = read_state_files(paths["states"] / run.name)
        files_by_run[run.name] = files
        record.files = len(files)
        record.stored = files[0].stored if files else None
        record.checks = check_against_transformers(
            paths["model"], files, rows, plan.served_layer_ids, dtype=plan.dtype
        )
        problems += [f"{run.name} connector: {c.describe()}" for c in record.checks if not c.ok]
    forward = pipeline.get("forward") or {}
    if plan.train_steps == 0 and not forward.get("loss_finite"):
        problems.append(f"the draft's forward pass gave a loss of {forward.get('loss')}")
    if generator is not None:
        problems += _cross_check(plan, paths, generator, files_by_run, result)
    result.stage_seconds["compare"] = round(time.monotonic() - began, 2)
    result.status = "mismatch" if problems else "passed"
    if problems:
        result.error = "the user's served path wrote wrong data:\n  " + "\n  ".join(problems[:10])
        raise ServedPathFailed(result, result.error)


def _cross_check(
    plan: ServedPlan,
    paths: dict[str, Path],
    generator: GeneratorFiles,
    files_by_run: Mapping[str, Any],
    result: ServedResult,
) -> list[str]:
    """The generator generation's files of the same model against the served ones."""
    mine, theirs = model_digest(paths["model"]), model_digest(generator.model_dir)
    if mine != theirs:
        raise VerifyError(
            f"the generator files in {generator.data_dir} were made from another model "
            f"({generator.model_dir}: sha256 {theirs[:12]}…, this run's {mine[:12]}…)"
        )
    trained = next(run for run in plan.connectors if run.train)
    checks, samples = check_against_generator(
        files_by_run[trained.name], plan.served_layer_ids, generator.data_dir, generator.layer_ids
    )
    result.generator = {
        "data_dir": str(generator.data_dir),
        "layer_ids": list(generator.layer_ids),
        "samples": samples,
        "checks": len(checks),
        "failed": [c.describe() for c in checks if not c.ok],
        "max_abs_error_per_layer": {str(k): v for k, v in max_error_per_layer(checks).items()},
    }
    return [f"vs the generator generation: {c.describe()}" for c in checks if not c.ok]
