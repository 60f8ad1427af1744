"""Which built files a passing verification report of this very build vouches for
(``publish --require-verified``): a report counts only with ``status == "passed"`` and the
build's ``inputs`` hash; each patched file must be listed by one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchwheel import manifest

if TYPE_CHECKING:
    from patchwheel.publish.twine import Candidate

VERIFY_REPORTS = {"verify-cpu.json": "nox -s verify", "verify-gpu.json": "nox -s gpu"}


def verified_sha256s(target_dir: Path, inputs: str) -> tuple[set[str], dict[str, str]]:
    """The sha256s listed by the passing reports of this build, and each report's state.

    The contract (verify-cpu.json and verify-gpu.json as the verify layer writes them): a JSON
    object with ``"target"`` (this target), ``"inputs"`` (the inputs hash of the build it
    verified: manifest.json's, so a report of another build of the same target does not
    count), ``"status": "passed"`` (only that: a ``"passed"`` key is never read) and
    ``"packages"`` (or ``"wheels"``): a list of ``{"filename", "sha256", …}``, the sha256s
    being those of the target's files it installed.
    """
    verified: set[str] = set()
    states: dict[str, str] = {}
    for name, session in VERIFY_REPORTS.items():
        path = target_dir / name
        if not path.is_file():
            states[name] = f"missing (run {session} -- --target {target_dir.name})"
            continue
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            states[name] = f"unreadable ({exc})"
            continue
        problem = _report_problem(data, target_dir.name, inputs, session)
        if problem:
            states[name] = problem
            continue
        sha256s = _listed_sha256s(data)
        verified |= sha256s
        states[name] = f"passed ({len(sha256s)} file(s))"
    return verified, states


def _report_problem(data: object, target: str, inputs: str, session: str) -> str | None:
    if not isinstance(data, dict):
        return "unreadable (not a JSON object)"
    if data.get("target") != target:
        return f"not a report of {target} (target: {data.get('target')!r})"
    if not inputs:
        return "not usable: the build's manifest records no inputs hash (rebuild the target)"
    if data.get("inputs") != inputs:
        return (
            f"not a report of this build (inputs {str(data.get('inputs'))[:12]}…, the build's "
            f"{inputs[:12]}…): run {session} -- --target {target} again"
        )
    if data.get("status") != "passed":
        return f"not passed (status: {data.get('status')!r})"
    if not _listed_sha256s(data):
        return "unreadable (no 'packages' list with sha256s)"
    return None


def _listed_sha256s(data: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for key in ("packages", "wheels"):
        items = data.get(key)
        if isinstance(items, list):
            found |= {
                item["sha256"]
                for item in items
                if isinstance(item, dict) and isinstance(item.get("sha256"), str)
            }
    return found


def unverified(
    files: list[Candidate], built: manifest.Manifest, verified: set[str]
) -> dict[str, str]:
    """The files ``--require-verified`` holds back, with why (see the module doc)."""
    pinned = {pin.sha256 for pin in built.pins.values() if pin.sha256}
    patched = [w for w in built.wheels if w.patched]
    missing = [w.filename for w in patched if w.sha256 not in verified]
    held: dict[str, str] = {}
    for candidate in files:
        if candidate.sha256 in verified:
            continue
        if not candidate.patched and candidate.sha256 in pinned and verified and not missing:
            continue  # the pinned upstream artifact of a verified build
        if not candidate.patched and candidate.sha256 in pinned:
            why = (
                "an unpatched upstream file, published once this build's passing reports list "
                "every patched file" + (f" (unverified: {', '.join(missing)})" if missing else "")
            )
        else:
            why = "no passing verification report of this build lists its sha256"
        held[candidate.filename] = why
    return held
