"""``make_wheelhouse``: plan, solve, check and write a target's wheelhouse under its build lock."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchwheel import console, manifest
from patchwheel.config.targets import TARGET_FILE, load_target
from patchwheel.errors import ConfigError
from patchwheel.index import outputs
from patchwheel.kernels import Row
from patchwheel.upstream.cache import Cache
from patchwheel.wheelhouse.check import check, check_fallbacks, explain
from patchwheel.wheelhouse.kernels import check_carried
from patchwheel.wheelhouse.plan import CONFIG_FILE, Carried, Options, make_plan, read_config
from patchwheel.wheelhouse.solve import solve
from patchwheel.wheelhouse.write import make_lock, write_folder
from patchwheel.workspace import Workspace

DIRNAME = "wheelhouse"


@dataclass
class Report:
    """What a wheelhouse run produced (``lock`` is wheelhouse.lock.json's content)."""

    path: Path
    lock: dict[str, Any]
    carried: list[Carried]
    seconds: float
    dry_run: bool
    # the carried wheels' CUDA modules against the destination's GPUs (empty: not checked)
    kernels: list[Row] = field(default_factory=list)
    gpu_archs: tuple[str, ...] = ()


def make_wheelhouse(workspace: Workspace, cache: Cache, options: Options) -> Report:
    """Resolve, download and write the wheelhouse of ``options.target``."""
    start = time.monotonic()
    cache.sweep_tmp()
    config = read_config(workspace.patches / options.target / CONFIG_FILE)
    gpu = load_target(workspace.patches, options.target).gpu
    archs = gpu.archs if options.gpu_archs is None else options.gpu_archs
    table: list[Row] = []
    with workspace.locked(options.target):
        store = outputs.current(workspace.build, options.target)
        if store is None or not manifest.path_in(store).is_file():
            raise ConfigError(
                f"{workspace.target_dir(options.target)} does not exist: build the target first "
                f"(`nox -s build -- --target {options.target}`)"
            )
        try:
            built = manifest.read(manifest.path_in(store))
        except manifest.ManifestError as exc:
            raise ConfigError(
                f"{manifest.path_in(store)} is not a patchwheel manifest ({exc}): rebuild the "
                f"target (`nox -s build -- --target {options.target}`)"
            ) from exc
        plan = make_plan(built, store, options, config)
        with cache.staging_dir("wheelhouse") as work:
            carried, graph = solve(plan, options, cache, work)
            check(carried, plan, graph)
            check_fallbacks(carried, plan, graph, options.destination)
            explain(carried, plan, graph)
            lock = make_lock(built, options, plan, carried, graph)
            if archs and not options.dry_run:
                toml = f"patches/{options.target}/{TARGET_FILE}"
                table, lock["gpu"] = check_carried(
                    carried,
                    archs,
                    gpu,
                    cache,
                    where=f"the wheelhouse of {options.target}",
                    archs_from="--gpu-arch" if options.gpu_archs else f"gpu-archs in {toml}",
                    specific_in=toml,
                )
            out = options.out or (store / DIRNAME)
            if not options.dry_run:
                write_folder(out.resolve(), carried, lock, options.split)
    shown = options.out or (workspace.target_dir(options.target) / DIRNAME)
    return Report(
        shown, lock, carried, time.monotonic() - start, options.dry_run, table, tuple(archs)
    )


def summary_rows(report: Report) -> Iterable[tuple[str, str, str, str]]:
    """(name, version, size, why) for the human summary."""
    for item in sorted(report.carried, key=lambda c: (-c.size, c.name)):
        why = item.requested or "← " + ", ".join(item.dependency_of)
        yield item.name, item.version, console.human_bytes(item.size), why
