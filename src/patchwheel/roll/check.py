"""The steps of a roll after its rebase: build (with the audit), bisect the drift the audit
finds, verify. Each step records what it found in the roll's state (``state.checks``) and
returns the next step, so a roll killed at any of them goes on from there (``--continue``).

* **build** (:func:`build_step`) — ``build_target`` of the rolled target; its audit hook audits
  each patched consumer of the target's ``[audit]`` against the patched provider with the
  provider's *old* sources as the baseline, so what it reports is drift the roll introduced.
  The wheels are built either way (the report says so). A variant kept at an older release
  (its new version has no wheel) is audited against its own patched files too
  (``audit.target.audit_kept``); its findings count like the main pair's.
* **bisect** (:func:`bisect_step`) — when the audit finds drift: the first upstream commit
  between the old and the new commit that introduces it (``patchwheel.bisect``, called from
  :func:`run_bisect`); on a release channel with no repository, the first release between the
  old and the new one (the release sdists are the steps).
* **verify** (:func:`verify_step`) — on CPU where the target has a ``cpu`` variant: what
  ``nox -s verify`` runs (the consumer's install commands, the model families against both oracles,
  speculators' library pipeline: ``extraction``), or the install check (``install``: what a
  stack without vLLM, such as the tests' tiny targets, can run). Without a CPU variant the GPU
  session verifies it; the report gives its commands.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from patchwheel import console
from patchwheel.audit.report import AuditReport
from patchwheel.audit.target import (
    PROVIDER,
    KeptVariant,
    audit_kept,
    audit_target,
    manifest_entry,
)
from patchwheel.bisect.run import bisect_target
from patchwheel.building.run import build_target, vendor_trees
from patchwheel.config.channel import Channel
from patchwheel.config.lock import LockedPin
from patchwheel.config.pins import IndexPin, parse_pin
from patchwheel.config.targets import PinSpec, Target, load_target
from patchwheel.errors import PatchwheelError, VerifyError
from patchwheel.roll.state import RollState, Step
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree_of
from patchwheel.verify import extra_indexes_for, verify_as_user, verify_install
from patchwheel.workspace import Workspace


@dataclass
class Checks:
    """What the checks after the rebase found (each a dict, as roll.json records it)."""

    build: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict)
    bisect: dict[str, Any] | None = None
    verification: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, state: RollState) -> Checks:
        """The checks a roll has recorded so far."""
        found = state.checks
        return cls(
            dict(found.get("build") or {}),
            dict(found.get("audit") or {}),
            found.get("bisect"),
            dict(found.get("verification") or {}),
        )

    @property
    def green(self) -> bool:
        """Built, no new drift, verified (or verified by the GPU session, which is not here)."""
        return (
            self.build.get("status") == "built"
            and self.audit.get("status") in ("passed", "skipped")
            and self.verification.get("status") in ("passed", "gpu")
        )


class _AuditCapture:
    """The build's audit hook: each patched consumer of the target's ``[audit]`` against the
    patched provider, baseline the provider's old sources; the reports are kept, the build goes
    on."""

    def __init__(self, baseline: Path | None, cache: Cache) -> None:
        self.baseline = baseline
        self.cache = cache
        self.ran = False
        self.reports: dict[str, AuditReport] = {}
        self.kept: list[tuple[KeptVariant, str, AuditReport]] = []
        self.skipped: str | None = None

    def __call__(self, target: Target, trees: dict[str, Path]) -> dict[str, Any]:
        self.ran = True
        spec = target.audit
        names = [*spec.consumers, spec.provider]
        if any(name not in trees for name in names):
            self.skipped = f"the target does not build {', '.join(names[:-1])} and {names[-1]}"
            return {"skipped": self.skipped}
        self.reports = audit_target(
            spec, trees, baseline=self.baseline, cache=self.cache, progress=console.stderr
        )
        for report in self.reports.values():
            report.render(console.stderr)
        self.kept = audit_kept(
            target, trees, baseline=self.baseline, cache=self.cache, progress=console.stderr
        )
        for _kept, _consumer, kept_report in self.kept:
            kept_report.render(console.stderr)
        entry = manifest_entry(self.reports, allowed=True)
        entry["allowed"] = self.findings
        if self.kept:
            entry["kept-variants"] = {
                _kept_key(k, consumer, spec.consumers): {**r.summary(), "provider": k.label}
                for k, consumer, r in self.kept
            }
        return entry

    @property
    def report(self) -> AuditReport | None:
        """The first consumer's report (the one the bisect follows), once the audit ran."""
        return next(iter(self.reports.values()), None)

    @property
    def findings(self) -> bool:
        """Whether any pair found drift."""
        return any(r.findings for r in [*self.reports.values(), *(r for *_k, r in self.kept)])


def _kept_key(kept: KeptVariant, consumer: str, consumers: tuple[str, ...]) -> str:
    return f"{kept.key} {consumer}" if len(consumers) > 1 else kept.key


def build_step(workspace: Workspace, cache: Cache, state: RollState) -> Step:
    """Build the rolled target with the audit (drift against the old pin's sources); record
    both; the next step: ``bisect`` on drift, ``verify``, or ``report`` when the build failed.

    A build already up to date runs no audit hook (a roll killed after its build, or a person's
    own build after answering drift): the audit then runs on the vendor trees by itself.
    """
    target = load_target(workspace.patches, state.output)
    project = target.project(state.project)
    old = {k: LockedPin(**v) for k, v in state.old.items()}
    moved_provider = state.moved and project.name == PROVIDER
    baseline = (
        _old_tree(workspace, state, old[project.source.key], cache) if moved_provider else None
    )
    capture = _AuditCapture(baseline, cache)
    state.checks = {}
    began = time.monotonic()
    try:
        built = build_target(state.output, workspace, cache, audit=capture if state.moved else None)
        if state.moved and not capture.ran:
            capture(target, vendor_trees(state.output, workspace, cache))
    except PatchwheelError as exc:
        state.add_time("build", time.monotonic() - began)
        state.checks = {
            "build": {"status": "failed", "error": str(exc)},
            "audit": _audit_entry(capture, error="the build stopped before the audit"),
            "verification": {"status": "skipped", "reason": "the build failed"},
        }
        return "report"
    state.add_time("build", time.monotonic() - began)
    state.checks["build"] = {
        "status": "built",
        "up-to-date": built.up_to_date,
        "inputs": built.manifest.inputs,
        "wheels": [
            {
                "distribution": w.distribution,
                "variant": w.variant,
                "version": w.version,
                "filename": w.filename,
                "sha256": w.sha256,
            }
            for w in built.manifest.wheels
        ],
    }
    if not state.moved:
        state.checks["audit"] = {
            "status": "skipped",
            "reason": "the pins did not move: there is no drift to look for",
        }
        return "verify"
    state.checks["audit"] = _audit_entry(
        capture, baseline=old[project.source.key].pin if moved_provider else None
    )
    if capture.report is not None and capture.findings:
        return "bisect"
    return "verify"


def bisect_step(workspace: Workspace, cache: Cache, state: RollState) -> Step:
    """Bisect the drift the audit found (against the same baseline, the old sources); the
    wheels are not verified until the drift is answered."""
    target = load_target(workspace.patches, state.output)
    project = target.project(state.project)
    entry = LockedPin(**state.old[project.source.key])
    baseline = _old_tree(workspace, state, entry, cache) if project.name == PROVIDER else None
    began = time.monotonic()
    state.checks["bisect"] = _bisect(
        workspace, cache, state, entry, project.channel, project.name, baseline=baseline
    )
    state.add_time("bisect", time.monotonic() - began)
    state.checks["verification"] = {
        "status": "skipped",
        "reason": "the audit found drift: the wheels are not verified until it is answered",
    }
    return "report"


def skip_bisect(state: RollState) -> Step:
    """``--skip`` at the bisect: no bisect; the drift stands, the wheels stay unverified."""
    state.checks["bisect"] = {"status": "skipped", "reason": "skipped with --skip"}
    state.checks["verification"] = {
        "status": "skipped",
        "reason": "the audit found drift: the wheels are not verified until it is answered",
    }
    return "report"


def verify_step(workspace: Workspace, state: RollState) -> Step:
    """Verify the built target (CPU, or the GPU session's commands); record it."""
    target = load_target(workspace.patches, state.output)
    began = time.monotonic()
    state.checks["verification"] = verify(workspace, state, target)
    state.add_time("verify", time.monotonic() - began)
    return "report"


def _audit_entry(
    capture: _AuditCapture, *, baseline: str | None = None, error: str | None = None
) -> dict[str, Any]:
    report = capture.report
    if error is not None:
        return {"status": "error", "error": error}
    if report is None:
        return {
            "status": "skipped",
            "reason": capture.skipped or "the build stopped before the audit",
        }
    findings = [f for r in capture.reports.values() for f in r.to_dict()["findings"]]
    kept = [
        {
            "key": k.key,
            "consumer": consumer,
            "provider": k.label,
            "status": "findings" if r.findings else "passed",
            "summary": r.summary(),
            "findings": r.to_dict()["findings"],
        }
        for k, consumer, r in capture.kept
    ]
    summary = manifest_entry(capture.reports, allowed=False)
    summary.pop("allowed", None)
    return {
        "status": "findings" if capture.findings else "passed",
        "baseline": baseline or report.baseline.label,
        "summary": summary,
        "findings": findings + [f for k in kept for f in k["findings"]],
        "kept-variants": kept,
    }


def _old_tree(workspace: Workspace, state: RollState, entry: LockedPin, cache: Cache) -> Path:
    """The provider's sources at the old pin (the audit's baseline)."""
    root = workspace.patches / state.target
    spec = PinSpec(entry.key, parse_pin(entry.pin, base_dir=root), "sdist")
    return source_tree_of(spec, entry, cache).path


# --------------------------------------------------------------------------- bisect


def old_commit(entry: LockedPin, channel: Channel | None, cache: Cache) -> str | None:
    """The commit of the old pin in the channel's repository, where one can be named: a git
    pin's commit, a version's ``+g<commit>`` label, or the release tag ``v<version>``."""
    if entry.kind == "git" and entry.commit:
        return entry.commit
    if channel is None:
        return None
    version = entry.version
    if version is None:
        pin = parse_pin(entry.pin)
        version = pin.version if isinstance(pin, IndexPin) else None
    if version is None:
        return None
    repo = gitsrc.mirror_repo(channel.repository, cache)
    label = version.partition("+")[2].split(".")[0]
    if label.startswith("g") and len(label) > 7:
        return gitsrc.expand_commit(repo, label[1:], what=f"the old pin {entry.pin}")
    for tag in (f"v{version}", version):
        try:
            return gitsrc.resolve_in(repo, tag)
        except (PatchwheelError, git.GitCommandError):
            continue
    return None


def _bisect(
    workspace: Workspace,
    cache: Cache,
    state: RollState,
    old: LockedPin,
    channel: Channel | None,
    project: str,
    *,
    baseline: Path | None,
) -> dict[str, Any]:
    """Bisect the drift the build's audit found, against the same baseline (the old sources)."""
    releases = _release_range(state, old, project)
    if releases is not None:
        return run_bisect(
            workspace,
            cache,
            state.output,
            project=project,
            good=releases[0],
            bad=releases[1],
            repo=None,
            baseline=baseline,
        )
    good = old_commit(old, channel, cache)
    bad = str(state.new.get("commit") or "")
    if good is None or not bad:
        return {
            "status": "skipped",
            "reason": f"the old pin {old.pin} names no commit of the channel's repository",
        }
    repo = cache.git_path(gitsrc.mirror_key(channel.repository)) if channel else None
    return run_bisect(
        workspace,
        cache,
        state.output,
        project=project,
        good=good,
        bad=bad,
        repo=repo,
        baseline=baseline,
    )


def _release_range(state: RollState, old: LockedPin, project: str) -> tuple[str, str] | None:
    """``(name==old, name==new)`` for a roll along the releases on the package index (no git
    repository is known: the release sdists are the bisect's steps)."""
    if (state.new.get("channel") or {}).get("kind") != "releases":
        return None
    pin = parse_pin(old.pin)
    if not isinstance(pin, IndexPin):
        return None
    return f"{pin.name}=={pin.version}", f"{pin.name}=={state.new['version']}"


def run_bisect(
    workspace: Workspace,
    cache: Cache,
    target: str,
    *,
    project: str,
    good: str,
    bad: str,
    repo: Path | None,
    baseline: Path | None = None,
) -> dict[str, Any]:
    """Bisect the audit's drift between ``good`` and ``bad`` (never raises: errors recorded).

    ``baseline``: the provider tree the audit compared against (the old pin's sources), so the
    bisect follows the same findings; default the target's own provider.
    """
    console.status(f"bisect {project} {good[:12]}..{bad[:12]} for the audit's drift")
    try:
        report = bisect_target(
            workspace,
            cache,
            target,
            project=project,
            good=good,
            bad=bad,
            repo=repo,
            consumer_target=target,
            baseline=str(baseline) if baseline is not None else None,
        )
        data: Any = report.to_dict()
        markdown = report.to_markdown()
    except PatchwheelError as exc:
        return {"status": "error", "error": str(exc), "good": good, "bad": bad}
    return {"status": "ran", "good": good, "bad": bad, "report": data, "markdown": markdown}


# --------------------------------------------------------------------------- verify


def verify(workspace: Workspace, state: RollState, target: Target) -> dict[str, Any]:
    """CPU verification where the target has a CPU variant; else the GPU session's commands."""
    project = target.project(state.project)
    name = state.output
    if not any(v.name == "cpu" for v in project.variants):
        return {
            "status": "gpu",
            "reason": f"{name} has no CPU variant of {project.name}: the GPU session verifies it",
            "next": [
                f"nox -s wheelhouse -- --target {name} --installed gpu-freeze.txt --split 60MiB",
                f"nox -s gpu -- --target {name} --wheelhouse build/{name}/wheelhouse "
                "--use-system-torch",
            ],
        }
    target_dir = workspace.target_dir(name)
    kept = {
        m["variant"]: f"{m['distribution']} kept at {m['old_pin']} ({m['distribution']} "
        f"{m['version']} was not built upstream): verified at that version"
        for m in state.new.get("missing", [])
        if m["policy"] == "keep"
    }
    result = _verify_cpu(workspace, state, target, target_dir)
    if kept:
        result["kept-variants"] = kept
    return result


def _verify_cpu(
    workspace: Workspace, state: RollState, target: Target, target_dir: Path
) -> dict[str, Any]:
    name = state.output
    try:
        if state.verify == "install":
            installed = verify_install(
                target_dir,
                index_dir=target_dir / "simple",
                work_dir=workspace.work_dir(name, "verify-install"),
                console=console.stderr,
            )
            return {
                "status": "passed",
                "mode": "install",
                "imported": installed.imported,
                "packages": installed.packages,
                "report": "verify-install.json",
            }
        report = verify_as_user(
            target,
            target_dir,
            workspace.work_dir(name, "verify-cpu"),
            extra_index_urls=extra_indexes_for(os.environ),
            console=console.stderr,
        )
        return {
            "status": "passed",
            "mode": "extraction",
            "checks": len(report.checks),
            "report": "verify-cpu.json",
        }
    except VerifyError as exc:
        return {"status": "failed", "mode": state.verify, "error": str(exc)}
