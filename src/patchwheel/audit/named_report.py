"""Names given as strings, baseline against new: findings, blind spots and what was resolved.

Each site of :func:`patchwheel.audit.named.scan` is resolved at the baseline and at the new pin.
A name that resolved at the baseline and no longer does is a finding (``unresolved-name``), as
is a worker method whose literal arguments no longer fit it, or a worker extension name the
worker gained (vLLM refuses the extension then). What already failed at the baseline, and every
name that is not a literal, is a blind spot.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchwheel.audit.findings import Kind
from patchwheel.audit.layout import Roots, relative, source_line
from patchwheel.audit.named import Resolution, Resolver, Site
from patchwheel.audit.report import BlindSpot, Finding
from patchwheel.audit.signatures import ProviderSide, Signature, changes, relocations, signature_at
from patchwheel.audit.static import Symbol

_WHAT = {
    "connector": "connector",
    "module": "module",
    "class": "class",
    "rpc": "worker method",
}


@dataclass
class NamedResult:
    findings: list[Finding] = field(default_factory=list)
    blind_spots: list[BlindSpot] = field(default_factory=list)
    named: int = 0
    rpc: int = 0
    instantiated: set[str] = field(default_factory=set)  # consumer classes the provider builds


def _signature(symbol: Symbol) -> Signature | None:
    qualname = symbol.dotted[len(symbol.module) + 1 :]
    return signature_at(symbol.module, symbol.path, qualname) if qualname else None


def side(
    resolution: Resolution | None, written: str, root: Path, consumer: Path | None = None
) -> ProviderSide | None:
    """What a site resolved to, for the report (its location relative to the tree holding
    it: `root`, the provider's, or `consumer` for the consumer's own classes)."""
    if resolution is None:
        return None
    symbol = resolution.symbol
    if symbol is None:
        return ProviderSide(written, exists=False)
    tree = consumer if consumer is not None and resolution.owner == "consumer" else root
    location = f"{relative(symbol.path, tree)}:{symbol.line}"
    return ProviderSide(symbol.dotted, True, location, _signature(symbol))


def arity(site: Site, signature: Signature | None) -> list[tuple[str, str, str]]:
    """How the literal arguments of a ``collective_rpc`` call fit the method's signature."""
    if signature is None or signature.params is None:
        return []
    params = signature.params
    positional = [p for p in params if p.kind in ("positional-only", "positional-or-keyword")]
    named = {p.name for p in params if p.kind in ("positional-or-keyword", "keyword-only")}
    star = any(p.kind == "var-positional" for p in params)
    kwargs_ok = any(p.kind == "var-keyword" for p in params)
    out = []
    if site.args is not None and site.args > len(positional) and not star:
        out.append(
            (
                str(Kind.TOO_MANY_ARGUMENTS),
                "",
                f"{site.args} positional argument(s) for {len(positional)}",
            )
        )
    for name in site.kwargs or ():
        if name not in named and not kwargs_ok:
            out.append((str(Kind.UNEXPECTED_ARGUMENT), name, f"unexpected keyword {name}"))
    if site.args is not None and site.kwargs is not None:
        given = {p.name for p in positional[: site.args]} | set(site.kwargs)
        for param in params:
            if param.required and param.name not in given and not param.kind.startswith("var-"):
                out.append((str(Kind.MISSING_ARGUMENT), param.name, f"missing {param.name}"))
    return out


def judge_named(
    sites: Sequence[Site],
    old: Resolver,
    new: Resolver,
    roots: Roots,
    paths: Collection[Path] | None = None,
) -> NamedResult:
    """Resolve every site at both pins and sort what changed into findings and blind spots."""
    out = NamedResult()
    for site in sites:
        if paths is not None and site.path not in paths:
            continue
        if site.value is None:
            out.blind_spots.append(
                _blind(
                    site,
                    Kind.DYNAMIC_NAME,
                    site.key,
                    f"the {_WHAT[site.role]} named by {site.key} is not a string literal: "
                    "the audit cannot resolve it",
                    roots,
                )
            )
            continue
        now, before = new.resolve(site), old.resolve(site)
        if now.symbol is None:
            if before.symbol is None:
                out.blind_spots.append(
                    _blind(
                        site,
                        Kind.UNRESOLVED_NAME,
                        site.value,
                        f"{site.written}: {now.reason}, as already at baseline",
                        roots,
                    )
                )
            else:
                out.findings.append(_unresolved(site, now, before, roots))
            continue
        if site.role == "rpc":
            out.rpc += 1
        elif site.role != "module":
            out.named += 1
        if site.role == "connector" and now.owner == "consumer":
            out.instantiated.add(now.symbol.dotted)
        _conflicts(out, site, now, before, roots)
        _arguments(out, site, now, before, roots)
    return out


def _finding(
    site: Site,
    kind: Kind,
    detail: str | None,
    message: str,
    new: ProviderSide,
    old: ProviderSide | None,
    roots: Roots,
    hints: tuple[str, ...] = (),
) -> Finding:
    return Finding(
        kind=kind,
        path=relative(site.path, roots.consumer),
        line=site.line,
        column=site.column,
        source=source_line(site.path, site.line),
        symbol=new.symbol if new.exists or old is None else old.symbol,
        detail=detail,
        message=message,
        code="named",
        new=new,
        old=old,
        changes=changes(old, new),
        hints=hints,
    )


def _blind(site: Site, kind: Kind, symbol: str, message: str, roots: Roots) -> BlindSpot:
    return BlindSpot(
        kind=kind,
        path=relative(site.path, roots.consumer),
        line=site.line,
        source=source_line(site.path, site.line),
        symbol=symbol,
        message=message,
        baseline_line=site.line,
    )


def _unresolved(site: Site, now: Resolution, before: Resolution, roots: Roots) -> Finding:
    assert site.value is not None and before.symbol is not None
    old = side(before, site.value, roots.baseline, roots.consumer)
    short = site.value.rsplit(".", 1)[-1]
    hints = relocations([short], roots.provider_dirs, roots.provider) if short else ()
    return _finding(
        site,
        Kind.UNRESOLVED_NAME,
        site.value,
        f"{site.written}: {now.reason} at the new pin (at baseline: {before.symbol.dotted})",
        ProviderSide(site.value, exists=False),
        old,
        roots,
        hints,
    )


def _conflicts(
    out: NamedResult, site: Site, now: Resolution, before: Resolution, roots: Roots
) -> None:
    old_keys = {(name, cls.dotted) for name, cls, _ in before.conflicts}
    for name, cls, line in now.conflicts:
        member = ProviderSide(
            f"{cls.dotted}.{name}", True, f"{relative(cls.path, roots.provider)}:{line}"
        )
        message = (
            f"{site.written}: the extension defines {name}, which the worker class "
            f"{cls.dotted} has too: the provider refuses to load the extension"
        )
        if (name, cls.dotted) in old_keys:
            message += " (as at baseline)"
            out.blind_spots.append(_blind(site, Kind.NAME_CONFLICT, member.symbol, message, roots))
        else:
            out.findings.append(
                _finding(site, Kind.NAME_CONFLICT, name, message, member, None, roots)
            )


def _arguments(
    out: NamedResult, site: Site, now: Resolution, before: Resolution, roots: Roots
) -> None:
    if site.role != "rpc" or now.owner != "provider" or now.symbol is None:
        return
    new_side = side(now, site.value or "", roots.provider)
    old_side = side(before, site.value or "", roots.baseline)
    assert new_side is not None
    found = arity(site, new_side.signature)
    held = {(k, n) for k, n, _ in arity(site, old_side.signature)} if old_side else set()
    for kind, name, text in found:
        message = f"collective_rpc({site.value!r}): {text}"
        if (kind, name) in held or old_side is None or not old_side.exists:
            why = " (as at baseline)" if (kind, name) in held else " (no such method at baseline)"
            out.blind_spots.append(_blind(site, Kind(kind), new_side.symbol, message + why, roots))
            continue
        out.findings.append(
            _finding(site, Kind(kind), name or None, message, new_side, old_side, roots)
        )
