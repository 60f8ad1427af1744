"""The API audit after a rebase: new drift at the new pins that no patch answers yet.

For every pair of projects where the consumer declares the provider (speculators 0.3.0 declares
``vllm==…``), or target.toml's ``[audit]`` names the pair with a baseline (a served target's
speculators and hs-connectors, which declare no vLLM), and either pin changed, the *patched*
consumer (its vendor tree, at the new pins) is audited against the provider's new sources, with
the provider's old sources as the baseline (or, when only the consumer moved, the provider
version the consumer declares, or the [audit] baseline). What the audit
reports is drift the move introduced that the series does not answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patchwheel import console
from patchwheel.audit import run_audit
from patchwheel.audit.layout import declared_pin
from patchwheel.config.lock import LockedPin, read_lock
from patchwheel.config.pins import parse_pin
from patchwheel.config.targets import LOCK_FILE, PinSpec, load_target
from patchwheel.errors import PatchwheelError
from patchwheel.patching.export import line_origin
from patchwheel.rebase.state import RebaseState, backup_dir
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree, source_tree_of


def run_audits(state: RebaseState, cache: Cache) -> dict[str, Any]:
    """Audit each changed consumer → provider pair.

    A pair whose audit cannot run (its sources cannot be had, the engine fails: a
    :class:`PatchwheelError`) is recorded with its error, and the result's status is then
    ``"failed"``, never ``"ran"``: the report must not say the new series was audited when it
    was not. Anything else is a bug and propagates.
    """
    old_lock = read_lock(backup_dir(state) / LOCK_FILE)
    new_lock = {str(e["key"]): LockedPin(**e) for e in state.lock}
    target_dir = Path(state.patches_dir) / state.output
    spec = load_target(Path(state.patches_dir), state.output).audit
    audited = (
        {(spec.provider, c): spec.baseline for c in spec.consumers}
        if spec.declared and spec.baseline
        else {}
    )
    pairs: list[dict[str, Any]] = []
    for consumer in state.projects:
        for provider in state.projects:
            if provider is consumer:
                continue
            moved = provider.old_identity != provider.new_identity
            if not (moved or consumer.affected):
                continue
            try:
                declared = declared_pin(consumer.path, provider.name)
            except PatchwheelError:
                # a consumer that declares no exact provider version (speculators 0.9 talks to
                # `vllm serve`; hs-connectors is loaded by it) is audited where target.toml's
                # [audit] names the pair, from its baseline
                if (provider.name, consumer.name) not in audited:
                    continue  # the consumer does not depend on this provider
                declared = audited[provider.name, consumer.name]
            old_entry, new_entry = old_lock[provider.name], new_lock[provider.name]
            pair: dict[str, Any] = {
                "project": consumer.name,
                "consumer": f"{consumer.name} (patched, {new_lock[consumer.name].pin})",
                "provider": new_entry.pin,
                "baseline": old_entry.pin if moved else declared,
            }
            try:
                provider_root = _tree(new_entry, target_dir, cache)
                baseline_root = (
                    _tree(old_entry, target_dir, cache) if moved else _tree_of(declared, cache)
                )
                console.status(
                    f"audit {pair['consumer']} → {pair['provider']} (baseline {pair['baseline']})"
                )
                result = run_audit(
                    consumer.path,
                    provider_root,
                    baseline_root,
                    labels=(pair["consumer"], pair["provider"], pair["baseline"]),
                    progress=console.stderr,
                )
            except PatchwheelError as exc:  # the rebase is done; the report says what failed
                pair["error"] = f"{type(exc).__name__}: {exc}"
                pairs.append(pair)
                continue
            full = result.to_dict()
            pair["summary"] = result.summary()
            pair["findings"] = full["findings"]
            for finding in pair["findings"]:
                finding["patch"] = line_origin(consumer.path, finding["path"], finding["line"])
            pairs.append(pair)
    if not pairs:
        return {
            "status": "skipped",
            "reason": "No project of the target declares another project whose pin changed.",
        }
    failed = [p for p in pairs if "error" in p]
    if failed:
        errors = "; ".join(f"{p['consumer']} → {p['provider']}: {p['error']}" for p in failed)
        return {
            "status": "failed",
            "reason": (
                f"The audit could not run for {len(failed)} of {len(pairs)} pair(s), so the "
                f"new series is NOT audited ({errors}). Fix the cause, then run "
                f"`nox -s audit -- --target {state.output}`."
            ),
            "pairs": pairs,
        }
    return {"status": "ran", "pairs": pairs}


def _tree(entry: LockedPin, target_dir: Path, cache: Cache) -> Path:
    spec = PinSpec(entry.key, parse_pin(entry.pin, base_dir=target_dir), "sdist")
    return source_tree_of(spec, entry, cache).path


def _tree_of(pin_text: str, cache: Cache) -> Path:
    return source_tree(pin_text, cache)
