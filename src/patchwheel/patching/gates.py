"""A patch's gates: when it applies, when it is dropped, which variants it is for.

Three header lines of a patch's message (beside its DEP-3 fields) say where a patch belongs,
so that one series can serve every target that builds the same upstream release (a pool,
``patches/pools/<project>-<version>/``) and every variant of an overlay project::

    Applies-When: vllm >= 0.29.0                     # optional; absent: always
    Drop-When: vllm >= 0.40.0 or upstream: speculators passes block_size to Scheduler
    Variants: cpu                                    # optional; absent: every variant

A *condition* is requirements joined by ``and`` (binding tighter) and ``or``; a requirement
is a project of the target and a PEP 440 specifier set on its pinned version
(``vllm >=0.27.0,<0.40``; the pin's local label is ignored). ``Drop-When`` may end with
``upstream: <prose>``: what a later release must do for the patch to go, which a person judges
when rolling onto it (no tool evaluates it); an alternative that is not a gate clause is such
prose too (``never``), while one that starts like a gate (``<name> <op>``) must be one. The
older ``<project> pin <op> <version>`` clause reads as ``<project> <op> <version>``. A patch
applies to a target when its ``Applies-When`` holds (or is absent), its ``Drop-When``'s
requirements do not hold, and the target builds one of its ``Variants`` (overlay projects).

Headers are input like any other: a gate that does not parse is an error naming the patch file
and line, and so is an Applies-When on a project the target does not pin or whose pin names no
version (a git pin); a Drop-When clause it cannot know is not true (only what holds drops).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from patchwheel.config.lock import LockedPin
from patchwheel.config.pins import IndexPin, parse_pin
from patchwheel.errors import PatchError, PinError

APPLIES_WHEN = "Applies-When"
DROP_WHEN = "Drop-When"
VARIANTS = "Variants"
GATE_FIELDS = (APPLIES_WHEN, DROP_WHEN, VARIANTS)
UPSTREAM = "upstream:"
_OR = re.compile(r"\s+or\s+")
_AND = re.compile(r"\s+and\s+")
_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<spec>[<>=!~].*)$")
_LEGACY = re.compile(
    r"^(?:the\s+)?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s+pin\s+(?:is\s+)?"
    r"(?P<op><=|>=|==|!=|<|>)\s*(?P<version>[0-9][0-9A-Za-z.+!-]*)$",
    re.IGNORECASE,
)
_VARIANT = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class Requirement:
    """``<project> <specifier set>``: true when the project's pinned version is in the set."""

    project: str  # canonical name
    specifier: SpecifierSet
    text: str

    def holds(
        self, versions: Mapping[str, Version | None], where: str, *, strict: bool = True
    ) -> bool:
        """Whether the pinned version is in the set. When it cannot be known (a project the
        target does not pin, a pin naming no version): an error, or with ``strict`` False not
        true (a Drop-When drops only what it knows)."""
        if not strict and versions.get(self.project) is None:
            return False
        if self.project not in versions:
            raise PatchError(
                f"{where}: `{self.text}` names {self.project}, which the target does not pin; "
                f"gate on one of its projects ({', '.join(sorted(versions)) or 'none'})"
            )
        version = versions[self.project]
        if version is None:
            raise PatchError(
                f"{where}: `{self.text}` cannot be evaluated: the target's {self.project} pin "
                "names no version (a git or URL pin); pin a release, or drop the gate"
            )
        return self.specifier.contains(Version(version.public), prereleases=True)


@dataclass(frozen=True)
class Condition:
    """Requirements joined by ``or`` of ``and``; for Drop-When, the upstream prose too."""

    text: str
    alternatives: tuple[tuple[Requirement, ...], ...]
    upstream: str = ""

    def holds(
        self, versions: Mapping[str, Version | None], where: str, *, strict: bool = True
    ) -> bool:
        """Whether one alternative's requirements all hold (the upstream prose never does)."""
        return any(
            all(r.holds(versions, where, strict=strict) for r in alternative)
            for alternative in self.alternatives
        )


@dataclass(frozen=True)
class Gates:
    """A patch's three gates (None: the header is absent)."""

    applies: Condition | None
    drop: Condition | None
    variants: frozenset[str] | None
    where: dict[str, str]  # field → "file:line", for messages


def field_line(data: bytes, name: str) -> int:
    """The 1-based line of the patch file where the field ``name`` starts (0: not found)."""
    prefix = name.lower() + ":"
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if line.lower().startswith(prefix):
            return number
        if line.startswith("diff --git "):
            break
    return 0


def parse_condition(text: str, where: str, *, prose: bool) -> Condition:
    """Parse a condition. ``prose`` (Drop-When): a clause that is not a gate is a person's
    judgement, never true (``upstream: …`` says so explicitly, and takes the rest of the line);
    a clause that starts like a gate (``<name> <op>``) must be one."""
    body = " ".join(text.split())
    upstream = ""
    at = body.lower().find(UPSTREAM)
    if at >= 0:
        if not prose:
            raise PatchError(f"{where}: `upstream:` is for Drop-When only; got {text!r}")
        upstream = body[at + len(UPSTREAM) :].strip()
        head = body[:at].strip()
        if not upstream:
            raise PatchError(f"{where}: `upstream:` must say what upstream must do")
        if head and not head.endswith(" or"):
            raise PatchError(
                f"{where}: `upstream: …` must come last, after `or` (e.g. "
                f"`vllm >= 0.40.0 or upstream: speculators calls X`); got {text!r}"
            )
        body = head[: -len(" or")].strip() if head else ""
    alternatives: list[tuple[Requirement, ...]] = []
    for alternative in _OR.split(body) if body else []:
        clauses = [_clause(part, where, prose=prose) for part in _AND.split(alternative)]
        if all(isinstance(c, Requirement) for c in clauses):
            alternatives.append(tuple(c for c in clauses if isinstance(c, Requirement)))
        else:
            upstream = upstream or alternative
    if not alternatives and not upstream:
        raise PatchError(f"{where}: the condition is empty")
    return Condition(" ".join(text.split()), tuple(alternatives), upstream)


def _clause(text: str, where: str, *, prose: bool) -> Requirement | None:
    """A gate clause, or None for prose (Drop-When only)."""
    clause = text.strip().rstrip(",;.")
    legacy = _LEGACY.match(clause)
    if legacy is not None:  # ``[the] <project> pin [is] <op> <version>``
        clause = f"{legacy.group('name')} {legacy.group('op')} {legacy.group('version')}"
    if prose and _REQUIREMENT.match(clause) is None:
        return None
    return _requirement(clause, where)


def _requirement(text: str, where: str) -> Requirement:
    match = _REQUIREMENT.match(text)
    problem = "not `<project> <specifier>`"
    if match is not None:
        try:
            specifier = SpecifierSet(match.group("spec").replace(" ", ""))
        except InvalidSpecifier:
            problem = f"{match.group('spec')!r} is not a PEP 440 specifier set"
        else:
            if len(specifier):
                return Requirement(canonicalize_name(match.group("name")), specifier, text)
            problem = "no specifier"
    raise PatchError(
        f"{where}: malformed gate `{text}` ({problem}): write `<project> <op> <version>` "
        "clauses joined by `and` / `or` (e.g. `vllm >= 0.29.0`), and for Drop-When what "
        "upstream must do after a final `or upstream: …`"
    )


def gates_of(patch_name: str, fields: Mapping[str, str], data: bytes, where: Path | str) -> Gates:
    """Parse a patch's gates; ``where`` names its file in messages (with the field's line)."""
    lines = {f: f"{where}:{field_line(data, f)}" for f in GATE_FIELDS if f in fields}
    applies = drop = None
    variants: frozenset[str] | None = None
    if APPLIES_WHEN in fields:
        applies = parse_condition(fields[APPLIES_WHEN], lines[APPLIES_WHEN], prose=False)
    if DROP_WHEN in fields:
        drop = parse_condition(fields[DROP_WHEN], lines[DROP_WHEN], prose=True)
    if VARIANTS in fields:
        names = [n.strip() for n in fields[VARIANTS].replace(",", " ").split()]
        bad = [n for n in names if not _VARIANT.match(n)]
        if not names or bad:
            raise PatchError(
                f"{lines[VARIANTS]}: patch {patch_name}: Variants must list variant names "
                f"(e.g. `Variants: cpu`), got {fields[VARIANTS]!r}"
            )
        variants = frozenset(names)
    return Gates(applies, drop, variants, lines)


def pin_versions(entries: Iterable[LockedPin]) -> dict[str, Version | None]:
    """The version each project's source pin names (canonical name → version; None: none)."""
    out: dict[str, Version | None] = {}
    for entry in entries:
        if ":" in entry.key:
            continue
        text = entry.version
        if text is None:
            try:
                pin = parse_pin(entry.pin)
            except PinError:
                pin = None
            text = pin.version if isinstance(pin, IndexPin) else None
        try:
            out[canonicalize_name(entry.key)] = Version(text) if text else None
        except InvalidVersion:
            out[canonicalize_name(entry.key)] = None
    return out


def variants_left(gates: Gates, variants: Collection[str]) -> frozenset[str]:
    """The variants of ``variants`` a patch is for (all of them when it names none)."""
    if gates.variants is None:
        return frozenset(variants)
    return gates.variants & frozenset(variants)


def verdict(
    gates: Gates,
    versions: Mapping[str, Version | None],
    variants: Sequence[str],
) -> tuple[bool, str]:
    """Whether a patch belongs to a target's series, and why not (its gate, in words)."""
    if gates.applies is not None and not gates.applies.holds(versions, gates.where[APPLIES_WHEN]):
        return False, f"Applies-When `{gates.applies.text}` does not hold"
    # Drop-When is three-valued, as in a rebase: a clause it cannot know is not true
    if gates.drop is not None and gates.drop.holds(versions, gates.where[DROP_WHEN], strict=False):
        return False, f"Drop-When `{gates.drop.text}` holds"
    if gates.variants is not None and not variants_left(gates, variants):
        built = ", ".join(variants) or "none"
        return False, (
            f"for variant(s) {', '.join(sorted(gates.variants))}, which the target does not "
            f"build (it builds {built})"
        )
    return True, ""
