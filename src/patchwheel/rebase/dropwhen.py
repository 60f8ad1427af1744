"""A patch's ``Drop-When`` read against pins: true, false, or unknown (three-valued logic).

The predicates the series use are clauses joined by ``or`` / ``and`` (``and`` binds tighter),
commas before a joiner allowed::

    speculators pin >= 0.4.0 or vLLM pin < 0.12
    the speculators pin is >= 0.4.0
    speculators pin passes block_size to Scheduler, or vLLM pin <= 0.11.0

A clause ``<project> <specifier set>`` (the gate grammar of patching/gates.py, e.g.
``vllm >= 0.40.0``), or the older ``[the] <project> pin [is] <op> <version>``, is evaluable
when the project is pinned to a known version: it is compared with the pin's public version (a
local label such as ``+g1a2b3c4`` or ``+pw…`` marks a build, not a release). Any other clause
is prose (``upstream: …``, what a later release must do), and so is a clause about a project
with no known version: *unknown*.
``or`` is true when one side is true, false when every side is false, else unknown; ``and`` is
false when one side is false, true when every side is true, else unknown. Only *true* drops a
patch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from patchwheel.config.lock import LockedPin
from patchwheel.config.pins import IndexPin, parse_pin
from patchwheel.errors import PinError

_OR = re.compile(r"\s*,?\s+or\s+", re.IGNORECASE)
_AND = re.compile(r"\s*,?\s+and\s+", re.IGNORECASE)
_CLAUSE = re.compile(
    r"^(?:the\s+)?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s+pin\s+(?:is\s+)?"
    r"(?P<op><=|>=|==|!=|<|>)\s*(?P<version>[0-9][0-9A-Za-z.+!-]*?)$",
    re.IGNORECASE,
)
_GATE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<spec>[<>=!~][^;]*)$")
_OPS = {
    "<": Version.__lt__,
    "<=": Version.__le__,
    ">": Version.__gt__,
    ">=": Version.__ge__,
    "==": Version.__eq__,
    "!=": Version.__ne__,
}


@dataclass(frozen=True)
class Clause:
    """One clause and what it came to: ``value`` True, False or None (unknown), and why."""

    text: str
    value: bool | None
    why: str


@dataclass(frozen=True)
class Evaluation:
    """A whole ``Drop-When`` evaluated: its value and every clause's."""

    text: str
    value: bool | None
    clauses: tuple[Clause, ...]

    @property
    def holds(self) -> bool:
        """Whether the predicate is true (unknown is not true)."""
        return self.value is True

    def explain(self) -> str:
        """One line: each clause with its value, e.g. ``speculators pin >= 0.4.0: true (0.4.0)``."""
        return "; ".join(f"`{c.text}`: {_word(c.value)} ({c.why})" for c in self.clauses)


def evaluate(text: str, versions: Mapping[str, Version | None]) -> Evaluation:
    """Evaluate a ``Drop-When`` against the pins' versions (canonical project name → version)."""
    known: dict[str, Version | None] = {canonicalize_name(k): v for k, v in versions.items()}
    body = text.strip().rstrip(".;")
    clauses: list[Clause] = []
    alternatives: list[bool | None] = []
    for alternative in _OR.split(body):
        parts = [_clause(part, known) for part in _AND.split(alternative)]
        clauses += parts
        alternatives.append(all_of([c.value for c in parts]))
    return Evaluation(text.strip(), any_of(alternatives), tuple(clauses))


def evaluate_each(text: str, version_sets: Sequence[Mapping[str, Version | None]]) -> Evaluation:
    """Evaluate a ``Drop-When`` for every build of the target: it holds only if it holds for
    each set of versions (a variant kept at an older release than its project's source is one
    more set: a patch it still needs is not dropped for the newer one's sake)."""
    evaluations = [evaluate(text, versions) for versions in version_sets]
    if len(evaluations) == 1:
        return evaluations[0]
    clauses = tuple(dict.fromkeys(c for e in evaluations for c in e.clauses))
    return Evaluation(text.strip(), all_of([e.value for e in evaluations]), clauses)


def build_versions(entries: Iterable[LockedPin]) -> list[dict[str, Version | None]]:
    """The version sets a target's builds stand on: its source pins' versions, then one set per
    variant whose wheel is of another release than its project's source (a kept variant)."""
    listed = list(entries)
    base = pin_versions(listed)
    sets = [base]
    for entry in listed:
        if ":" not in entry.key:
            continue
        project = canonicalize_name(entry.key.split(":", 1)[0])
        version = entry.file_version
        source = base.get(project)
        if version is None or source is None or Version(version.public) == Version(source.public):
            continue
        variant_set = {**base, project: version}
        if variant_set not in sets:
            sets.append(variant_set)
    return sets


def pin_versions(entries: Iterable[LockedPin]) -> dict[str, Version | None]:
    """The version each project's source pin names (canonical name → version, None: unknown).

    An index pin names its version; a channel's git commit carries the version its wheels were
    published under (the lock's ``version``); any other pin names none.
    """
    out: dict[str, Version | None] = {}
    for entry in entries:
        if ":" in entry.key:
            continue
        out[canonicalize_name(entry.key)] = _version_of(entry)
    return out


def _version_of(entry: LockedPin) -> Version | None:
    text = entry.version
    if text is None:
        try:
            pin = parse_pin(entry.pin)
        except PinError:
            return None
        text = pin.version if isinstance(pin, IndexPin) else None
    if text is None:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def any_of(values: list[bool | None]) -> bool | None:
    """Three-valued ``or``."""
    if any(v is True for v in values):
        return True
    if values and all(v is False for v in values):
        return False
    return None


def all_of(values: list[bool | None]) -> bool | None:
    """Three-valued ``and``."""
    if any(v is False for v in values):
        return False
    if values and all(v is True for v in values):
        return True
    return None


def _clause(text: str, versions: Mapping[str, Version | None]) -> Clause:
    text = " ".join(text.strip().rstrip(",;.").split())
    match = _CLAUSE.match(text)
    if match is None:
        return _gate_clause(text, versions)
    name = canonicalize_name(match.group("name"))
    try:
        wanted = Version(match.group("version"))
    except InvalidVersion:
        return Clause(text, None, f"{match.group('version')!r} is not a version")
    if name not in versions:
        return Clause(text, None, f"the target has no project {match.group('name')}")
    pinned = versions[name]
    if pinned is None:
        return Clause(text, None, f"the {name} pin names no version")
    value = _OPS[match.group("op")](Version(pinned.public), wanted)
    return Clause(text, bool(value), f"{name} {pinned}")


def _gate_clause(text: str, versions: Mapping[str, Version | None]) -> Clause:
    """A ``<project> <specifier set>`` clause (patching/gates.py), else prose."""
    match = _GATE.match(text)
    prose = Clause(text, None, "prose: not a `<project> <op> <version>` clause")
    if match is None or text.lower().startswith("upstream:"):
        return prose
    try:
        specifier = SpecifierSet(match.group("spec").replace(" ", ""))
    except InvalidSpecifier:
        return prose
    name = canonicalize_name(match.group("name"))
    if name not in versions:
        return Clause(text, None, f"the target has no project {match.group('name')}")
    pinned = versions[name]
    if pinned is None:
        return Clause(text, None, f"the {name} pin names no version")
    value = specifier.contains(Version(pinned.public), prereleases=True)
    return Clause(text, bool(value), f"{name} {pinned}")


def _word(value: bool | None) -> str:
    return {True: "true", False: "false", None: "unknown"}[value]
