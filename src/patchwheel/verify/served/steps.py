"""The user's commands of the served generation, run against real servers.

:func:`serve_and_generate` starts every ``vllm serve`` of the plan side by side (each on a free
loopback port, :func:`patchwheel.verify.served.server.serve_all`), runs ``python -m speculators
prepare-data`` through the trained connector's server and ``python -m speculators
generate-offline-data`` against each, and stops them all however it ends. A command that fails
is reported with its log's last lines and what the servers' logs say killed them
(:func:`explained`): a worker's exception, with the vLLM frame that raised it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError
from patchwheel.verify.served.launch import VenvServing, kv_transfer_config, serve_argv, vllm_args
from patchwheel.verify.served.plan import ConnectorRun, ServedPlan
from patchwheel.verify.served.results import ConnectorResult, ServedResult
from patchwheel.verify.served.server import ServerProcess, log_cause, serve_all

SPECULATORS = ("-m", "speculators")


def run_step(
    argv: Sequence[str], log: Path, *, env: Mapping[str, str], timeout_s: float, what: str
) -> float:
    """Run one of the user's commands; its seconds, or VerifyError naming it and its log."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        handle.write("$ " + " ".join(argv) + "\n")
        handle.flush()
        try:
            proc = subprocess.run(
                list(argv),
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=dict(env),
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise VerifyError(f"{what} did not finish in {timeout_s:.0f} s (log: {log})") from exc
    if proc.returncode != 0:
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-8:]
        raise VerifyError(f"{what} exited {proc.returncode} (log: {log})\n" + "\n".join(tail))
    return time.monotonic() - started


def explained(exc: VerifyError, servers: Sequence[ServerProcess]) -> VerifyError:
    """A client step's failure, with what the servers' logs say went wrong there."""
    found = []
    for server in servers:
        cause = log_cause(server.log_text())
        if cause is not None:
            state = "is still running" if server.alive() else "has exited"
            found.append(f"{server.name} ({state}) failed: {cause} (log: {server.log})")
    return VerifyError("\n".join([str(exc), *found])) if found else exc


def _generate(
    python: Path, plan: ServedPlan, run: ConnectorRun, url: str, paths: Mapping[str, Path],
    env: Mapping[str, str],
) -> float:  # fmt: skip
    """``generate-offline-data`` against one server; its seconds."""
    command = [
        str(python), *SPECULATORS, "generate-offline-data",
        "--model", str(paths["model"]), "--endpoint", f"{url}/v1",
        "--preprocessed-data", str(paths["prepared"]),
        "--output", str(paths["states"] / run.name),
        "--concurrency", str(plan.concurrency), "--fail-on-error",
    ]  # fmt: skip
    if run.validate:
        command.append("--validate-outputs")
    return run_step(
        command,
        paths["work"] / f"generate-{run.name}.log",
        env=env,
        timeout_s=plan.step_timeout_s,
        what=f"speculators generate-offline-data ({run.name} connector)",
    )


def serve_and_generate(
    python: Path,
    plan: ServedPlan,
    serving: VenvServing,
    paths: Mapping[str, Path],
    *,
    env: Mapping[str, str],
    result: ServedResult,
) -> None:
    """Every server of the plan started side by side; prepare-data through the trained
    connector's; generate-offline-data against each; all stopped however this ends."""
    work = paths["work"]
    records: dict[str, ConnectorResult] = {}
    commands = {}
    for run in plan.connectors:
        config = kv_transfer_config(run, serving)
        args = vllm_args(
            run, serving, dtype=plan.dtype, max_model_len=plan.max_model_len, extra=plan.serve_args
        )
        record = ConnectorResult(
            run.name, run.backend, config, [], str(work / f"serve-{run.name}.log")
        )
        records[run.name] = record
        result.connectors.append(record)

        def argv(port: int, config: dict[str, Any] = config, args: list[str] = args,
                 record: ConnectorResult = record) -> list[str]:  # fmt: skip
            record.command = serve_argv(
                python,
                paths["model"],
                port=port,
                layer_ids=plan.served_layer_ids,
                kv_config=config,
                vllm_args=args,
            )
            return record.command

        commands[run.name] = argv
    began = time.monotonic()
    with serve_all(
        commands,
        env=env,
        logs={name: Path(r.log) for name, r in records.items()},
        ready_path="/health",
        timeout_s=plan.ready_timeout_s,
        names={name: f"vllm serve ({name} connector)" for name in records},
    ) as ready:
        result.stage_seconds["serve"] = round(time.monotonic() - began, 2)
        for name, served in ready.items():
            records[name].ready_s = round(served.ready_s, 2)
        urls = {name: f"http://127.0.0.1:{served.port}" for name, served in ready.items()}
        servers = [served.server for served in ready.values()]
        trained = next(run for run in plan.connectors if run.train)
        try:
            result.stage_seconds["prepare_data"] = round(
                run_step(
                    [str(python), *SPECULATORS, "prepare-data",
                     "--model", str(paths["model"]), "--data", str(paths["dataset"]),
                     "--render-endpoint", urls[trained.name],
                     "--output", str(paths["prepared"]),
                     "--seq-length", str(plan.seq_length),
                     "--num-preprocessing-workers", "1", "--no-skip-token-freq"],
                    work / "prepare-data.log", env=env, timeout_s=plan.step_timeout_s,
                    what="speculators prepare-data",
                ),
                2,
            )  # fmt: skip
            seconds = {
                run.name: round(_generate(python, plan, run, urls[run.name], paths, env), 2)
                for run in plan.connectors
            }
        except VerifyError as exc:
            raise explained(exc, servers) from exc
        for name, took in seconds.items():
            records[name].generate_s = took
            result.stage_seconds[f"generate_{name}"] = took
