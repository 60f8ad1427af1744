"""The plugin contract, baseline against new: overrides, abstract methods, private provider API.

The provider calls a consumer's subclass through the methods its own classes declare, so each
method a consumer class defines is judged against the nearest provider definition of the same
name, at the baseline and at the new pin (:mod:`patchwheel.audit.overrides`). As for calls, only
what the new pin breaks is a finding; what already held at the baseline is a blind spot (an
override that already failed to match) or a private use listed as such. A hook that a provider
base had at the baseline and none has at the new pin is a *dead override*: the provider never
calls it again, silently.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchwheel.audit.engine import CheckResult, ClassRecord, Member, Method, Reference
from patchwheel.audit.findings import Kind
from patchwheel.audit.layout import Roots, relative, source_line
from patchwheel.audit.overrides import Problem, is_private, problems
from patchwheel.audit.report import BlindSpot, Finding, PrivateUse
from patchwheel.audit.signatures import (
    ProviderSide,
    changes,
    describe,
    describe_member,
    relocations,
)


@dataclass
class ContractResult:
    findings: list[Finding] = field(default_factory=list)
    blind_spots: list[BlindSpot] = field(default_factory=list)
    private: list[PrivateUse] = field(default_factory=list)
    overrides: int = 0
    classes: int = 0


def _class_of(symbol: str) -> str:
    """``vllm.x.Base.method`` -> ``Base``."""
    parts = symbol.split(".")
    return parts[-2] if len(parts) > 1 else symbol


def _judged(name: str, instantiated: bool) -> bool:
    """Dunders are the object model's, except a constructor the provider itself calls."""
    if name.startswith("__") and name.endswith("__"):
        return name == "__init__" and instantiated
    return True


def judge(
    baseline: CheckResult,
    new: CheckResult,
    roots: Roots,
    instantiated: Iterable[str] = (),
    paths: Collection[Path] | None = None,
) -> ContractResult:
    """Judge every consumer class of the new run against its record at the baseline.

    `instantiated`: consumer classes the provider constructs itself (named by string), whose
    ``__init__`` must accept what the base's does. `paths`: judge only classes in these files
    (several consumers checked in one engine run).
    """
    made = frozenset(instantiated)
    before = {c.symbol: c for c in baseline.classes}
    out = ContractResult()
    for record in new.classes:
        if paths is not None and record.path not in paths:
            continue
        out.classes += 1
        old_record = before.get(record.symbol)
        old_methods = {m.name: m for m in old_record.methods} if old_record else {}
        for method in record.methods:
            if _judged(method.name, record.symbol in made):
                old = old_methods.get(method.name)
                _method(out, record, old_record, method, old.base if old else None, roots)
        _abstract(out, record, old_record, roots)
    _private_references(out, baseline, new, roots, paths)
    return out


def _finding(
    kind: Kind,
    record: ClassRecord,
    line: int,
    column: int,
    roots: Roots,
    *,
    symbol: str,
    detail: str | None,
    message: str,
    new: ProviderSide,
    old: ProviderSide | None,
    notes: tuple[str, ...] = (),
    hints: tuple[str, ...] = (),
    override: str | None = None,
) -> Finding:
    return Finding(
        kind=kind,
        path=relative(record.path, roots.consumer),
        line=line,
        column=column,
        source=source_line(record.path, line),
        symbol=symbol,
        detail=detail,
        message=message,
        code="override",
        new=new,
        old=old,
        changes=(*changes(old, new), *notes),
        hints=hints,
        override=override,
    )


def _blind(
    kind: Kind, record: ClassRecord, line: int, symbol: str, message: str, roots: Roots
) -> BlindSpot:
    return BlindSpot(
        kind=kind,
        path=relative(record.path, roots.consumer),
        line=line,
        source=source_line(record.path, line),
        symbol=symbol,
        message=message,
        baseline_line=line,
    )


def _own(record: ClassRecord, method: Method, roots: Roots) -> str:
    side = describe_member(method.own, method.own.symbol, roots.consumer)
    return f"{record.name}.{side.render()}"


def _method(
    out: ContractResult,
    record: ClassRecord,
    old_record: ClassRecord | None,
    method: Method,
    old_base: Member | None,
    roots: Roots,
) -> None:
    base, name = method.base, method.name
    if base is None:
        if old_base is not None:
            out.findings.append(_dead(record, old_record, method, old_base, roots))
        return
    out.overrides += 1
    where = f"{record.name}.{name} overrides {_class_of(base.symbol)}.{name}"
    found = problems(method.own, base)
    before = {p.key for p in problems(method.own, old_base)} if old_base else set()
    fresh = [p for p in found if p.key not in before]
    held = [p for p in found if p.key in before]
    new_side = describe_member(base, base.symbol, roots.provider)
    old_side = describe_member(old_base, old_base.symbol, roots.baseline) if old_base else None
    gained = "" if old_base else f" ({_class_of(base.symbol)} gained {name} since the baseline)"
    if fresh:
        out.findings.append(
            _finding(
                Kind.OVERRIDE_SIGNATURE,
                record,
                method.line,
                method.column,
                roots,
                symbol=base.symbol,
                detail=_detail(fresh),
                message=f"{where}{gained}, and no longer accepts what it declares: "
                + "; ".join(p.text for p in fresh),
                new=new_side,
                old=old_side,
                override=_own(record, method, roots),
            )
        )
    if held:
        out.blind_spots.append(
            _blind(
                Kind.OVERRIDE_SIGNATURE,
                record,
                method.line,
                base.symbol,
                f"{where}, which it already did not match at baseline: "
                + "; ".join(p.text for p in held),
                roots,
            )
        )
    if is_private(name):
        if old_base is None:
            out.findings.append(
                _finding(
                    Kind.PRIVATE_API,
                    record,
                    method.line,
                    method.column,
                    roots,
                    symbol=base.symbol,
                    detail=name,
                    message=f"{where}{gained}: a private provider method, which no contract covers",
                    new=new_side,
                    old=None,
                    override=_own(record, method, roots),
                )
            )
        else:
            out.private.append(
                PrivateUse(
                    path=relative(record.path, roots.consumer),
                    line=method.line,
                    source=source_line(record.path, method.line),
                    name=name,
                    symbol=base.symbol,
                    use="override",
                )
            )


def _detail(found: Sequence[Problem]) -> str:
    return ", ".join(dict.fromkeys(p.param or "(binding)" for p in found))


def _dead(
    record: ClassRecord,
    old_record: ClassRecord | None,
    method: Method,
    old_base: Member,
    roots: Roots,
) -> Finding:
    """An override of a hook no provider base has at the new pin: where it went, if evident."""
    name, owner = method.name, _class_of(old_base.symbol)
    renamed = _renamed(old_base, dict(record.provider_members), old_record)
    notes: tuple[str, ...]
    if renamed:
        notes = (f"renamed to {renamed}? (a method the provider bases gained since)",)
        hints = relocations([renamed], roots.provider_dirs, roots.provider)
    else:
        notes = ()
        hints = relocations([name], roots.provider_dirs, roots.provider)
        if hints:
            notes = (f"{name} is still defined elsewhere in the provider, not in the bases",)
    return _finding(
        Kind.DEAD_OVERRIDE,
        record,
        method.line,
        method.column,
        roots,
        symbol=old_base.symbol,
        detail=name,
        message=f"{record.name}.{name} overrides {owner}.{name}, which no provider base of "
        f"{record.name} has at the new pin: the provider never calls it",
        new=ProviderSide(old_base.symbol, exists=False),
        old=describe_member(old_base, old_base.symbol, roots.baseline),
        notes=notes,
        hints=hints,
        override=_own(record, method, roots),
    )


def _renamed(
    old_base: Member, members: dict[str, tuple[str, ...]], old_record: ClassRecord | None
) -> str | None:
    """The method the bases gained that evidently replaces `old_base`: the only one whose name
    is nearly the same (90 %), or close (75 %) with the same parameter names."""
    before = dict(old_record.provider_members) if old_record else {}
    params = tuple(p.name for p in old_base.params)
    found = []
    for name, theirs in members.items():
        if name in before:
            continue
        ratio = difflib.SequenceMatcher(None, old_base.name, name).ratio()
        if ratio >= 0.9 or (ratio >= 0.75 and theirs == params):
            found.append(name)
    return found[0] if len(found) == 1 else None


def _abstract(
    out: ContractResult, record: ClassRecord, old_record: ClassRecord | None, roots: Roots
) -> None:
    """Abstract methods of the provider bases that the class does not implement."""
    if record.abstract:
        return  # a base of the consumer's own classes: its subclasses implement them
    before = {m.name for m in old_record.missing_abstract} if old_record else set()
    existed = {name for name, _ in old_record.provider_members} if old_record else set()
    for member in record.missing_abstract:
        where = f"{_class_of(member.symbol)}.{member.name}"
        if member.name in before:
            out.blind_spots.append(
                _blind(
                    Kind.MISSING_ABSTRACT,
                    record,
                    record.line,
                    member.symbol,
                    f"{record.name} does not implement {where}, abstract already at baseline",
                    roots,
                )
            )
            continue
        how = "became abstract" if member.name in existed else "is a new abstract method"
        out.findings.append(
            _finding(
                Kind.MISSING_ABSTRACT,
                record,
                record.line,
                0,
                roots,
                symbol=member.symbol,
                detail=member.name,
                message=f"{record.name} does not implement {where}, which {how} of its "
                "provider base: the provider cannot instantiate the class",
                new=describe_member(member, member.symbol, roots.provider),
                old=ProviderSide(member.symbol, exists=member.name in existed),
                notes=(f"{where} {how}",),
            )
        )


_USES = {"call": "call", "attribute": "read", "module-attribute": "read", "import": "import"}


def _private_uses(
    result: CheckResult, paths: Collection[Path] | None
) -> dict[tuple[Path, int, str], Reference]:
    """Private provider members the consumer calls, reads or imports, by site (a call and its
    attribute read on one line are one use)."""
    uses: dict[tuple[Path, int, str], Reference] = {}
    for ref in result.references:
        if not (ref.found and ref.checked and is_private(ref.name) and ref.role in _USES):
            continue
        if paths is not None and ref.path not in paths:
            continue
        key = (ref.path, ref.line, ref.name)
        if key not in uses or ref.role == "call":
            uses[key] = ref
    return uses


def _private_references(
    out: ContractResult,
    baseline: CheckResult,
    new: CheckResult,
    roots: Roots,
    paths: Collection[Path] | None,
) -> None:
    before = _private_uses(baseline, paths)
    for key, ref in sorted(
        _private_uses(new, paths).items(), key=lambda kv: (str(kv[0][0]), kv[0][1])
    ):
        path = relative(ref.path, roots.consumer)
        use = _USES[ref.role]
        text = source_line(ref.path, ref.line)
        if key in before:
            out.private.append(PrivateUse(path, ref.line, text, ref.name, ref.symbol, use))
            continue
        side = describe(ref, ref.symbol, roots.provider)
        out.findings.append(
            Finding(
                kind=Kind.PRIVATE_API,
                path=path,
                line=ref.line,
                column=ref.column,
                source=source_line(ref.path, ref.line),
                symbol=ref.symbol,
                detail=ref.name,
                message=f"{use} of {ref.symbol}, a private provider name no contract covers "
                "(not used this way at baseline)",
                code="private",
                new=side,
                old=None,
            )
        )
