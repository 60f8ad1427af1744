"""Which engine diagnostics are provider drift, and of what kind.

A diagnostic counts when it is one of the provider-related kinds below *and* it concerns a
provider symbol: the callee of the call it sits on, the class whose attribute is missing, the
module that is gone. Everything else the engine says about the consumer is not the audit's
business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from patchwheel.audit.engine import Diagnostic, Reference


class Kind(StrEnum):
    """Provider-related kinds of drift (signature drift: visible statically).

    The first seven are the consumer's calls into the provider; the rest its plugin contract:
    overrides of provider methods, the provider's abstract methods, private provider API, and
    classes or methods the consumer names by string for the provider to resolve.
    """

    MISSING_MODULE = "missing-module"
    MISSING_NAME = "missing-name"
    MISSING_ATTRIBUTE = "missing-attribute"
    UNEXPECTED_ARGUMENT = "unexpected-argument"
    MISSING_ARGUMENT = "missing-argument"
    TOO_MANY_ARGUMENTS = "too-many-arguments"
    NO_MATCHING_OVERLOAD = "no-matching-overload"
    OVERRIDE_SIGNATURE = "override-signature"  # no longer accepts what the base declares
    DEAD_OVERRIDE = "dead-override"  # overrides a method no provider base has any more
    MISSING_ABSTRACT = "missing-abstract"  # the base gained an abstract method
    PRIVATE_API = "private-api"  # a `_name` of the provider, overridden or used
    UNRESOLVED_NAME = "unresolved-name"  # a class or method named by string, not found
    NAME_CONFLICT = "name-conflict"  # a worker extension's name the worker already has
    DYNAMIC_NAME = "dynamic-name"  # named by a string built at run time (blind spot)


_CALLEE = r'(?P<callee>"[^"]+"(?: of "[^"]+")?)'
_PATTERNS: tuple[tuple[frozenset[str], Kind, re.Pattern[str]], ...] = tuple(
    (frozenset(codes), kind, re.compile(pattern))
    for codes, kind, pattern in (
        (
            {"call-arg"},
            Kind.UNEXPECTED_ARGUMENT,
            rf'^Unexpected keyword argument "(?P<detail>[^"]+)"(?: for {_CALLEE})?',
        ),
        (
            {"call-arg"},
            Kind.MISSING_ARGUMENT,
            rf"^Missing positional arguments? (?P<detail>.+) in call to {_CALLEE}",
        ),
        (
            {"call-arg"},
            Kind.MISSING_ARGUMENT,
            rf'^Missing named argument "(?P<detail>[^"]+)" for {_CALLEE}',
        ),
        ({"call-arg"}, Kind.MISSING_ARGUMENT, rf"^Too few arguments(?: for {_CALLEE})?"),
        (
            {"call-arg", "misc"},
            Kind.TOO_MANY_ARGUMENTS,
            rf"^Too many (?:positional )?arguments(?: for {_CALLEE})?",
        ),
        (
            {"call-overload"},
            Kind.NO_MATCHING_OVERLOAD,
            rf"^No overload variant of {_CALLEE} matches",
        ),
        (
            {"attr-defined"},
            Kind.MISSING_NAME,
            r'^Module "(?P<module>[^"]+)" (?:has no|does not explicitly export) attribute '
            r'"(?P<detail>[^"]+)"',
        ),
        (
            {"attr-defined"},
            Kind.MISSING_ATTRIBUTE,
            r'^"(?P<owner>.+)" has no attribute "(?P<detail>[^"]+)"',
        ),
        (
            {"union-attr"},
            Kind.MISSING_ATTRIBUTE,
            r'^Item "(?P<owner>[^"]+)" of ".+" has no attribute "(?P<detail>[^"]+)"',
        ),
        (
            {"import-not-found", "import"},
            Kind.MISSING_MODULE,
            r'^Cannot find implementation or library stub for module named "(?P<module>[^"]+)"',
        ),
    )
)

_SUGGESTION = re.compile(r";\s*maybe\s.*$|\s*\(possible typo\?\)")


def normalize(message: str) -> str:
    """The message without the parts that depend on what else the provider defines."""
    return " ".join(_SUGGESTION.sub("", message).split())


@dataclass(frozen=True)
class ProviderError:
    """A diagnostic about a provider symbol, with its kind and the reference it sits on."""

    kind: Kind
    diagnostic: Diagnostic
    symbol: str
    detail: str | None
    reference: Reference | None

    @property
    def keys(self) -> tuple[MatchKey, ...]:
        return match_keys(self.diagnostic)


MatchKey = tuple[Path, str, str]

_MISSING_MANY = re.compile(rf"^Missing positional arguments (?P<names>.+) in call to {_CALLEE}")


def match_keys(diagnostic: Diagnostic) -> tuple[MatchKey, ...]:
    """How a diagnostic is recognised in another run: file, code, normalized message.

    A message naming several missing arguments gives one key per argument, so that a call
    already missing one argument at baseline still shows the argument the new provider added.
    """
    message = normalize(diagnostic.message)
    many = _MISSING_MANY.match(message)
    if many is None:
        return ((diagnostic.path, diagnostic.code, message),)
    return tuple(
        (
            diagnostic.path,
            diagnostic.code,
            f'Missing positional argument "{name}" in call to {many["callee"]}',
        )
        for name in re.findall(r'"([^"]+)"', many["names"])
    )


def _short(name: str) -> str:
    """`type[vllm.x.Foo[int]]` -> `Foo`: the class name a message shows."""
    name = name.strip()
    if name.startswith("type[") and name.endswith("]"):
        name = name[5:-1]
    return name.split("[", 1)[0].rsplit(".", 1)[-1]


def _first_quoted(text: str | None) -> str | None:
    if not text:
        return None
    found = re.search(r'"([^"]+)"', text)
    return found.group(1) if found else None


class Classifier:
    """Classify one run's diagnostics against the references it resolved."""

    def __init__(self, references: Iterable[Reference], provider_packages: Sequence[str]) -> None:
        self.providers = frozenset(provider_packages)
        self.at: dict[tuple[Path, int, int], list[Reference]] = {}
        for ref in references:
            self.at.setdefault((ref.path, ref.line, ref.column), []).append(ref)

    def is_provider(self, qualified: str) -> bool:
        return qualified.split(".", 1)[0] in self.providers

    def refs(self, diagnostic: Diagnostic, roles: set[str]) -> list[Reference]:
        site = (diagnostic.path, diagnostic.line, diagnostic.column)
        return [ref for ref in self.at.get(site, []) if ref.role in roles]

    def classify(self, diagnostic: Diagnostic) -> ProviderError | None:
        for codes, kind, pattern in _PATTERNS:
            if diagnostic.code not in codes:
                continue
            found = pattern.match(diagnostic.message)
            if found is None:
                continue
            groups = found.groupdict()
            return self._provider_error(kind, diagnostic, groups)
        return None

    def _provider_error(
        self, kind: Kind, diagnostic: Diagnostic, groups: dict[str, str | None]
    ) -> ProviderError | None:
        detail = groups.get("detail")
        if kind is Kind.MISSING_MODULE:
            module = groups["module"] or ""
            if not self.is_provider(module):
                return None
            refs = [
                r
                for r in self.refs(diagnostic, {"import"})
                if r.symbol == module or r.symbol.startswith(f"{module}.")
            ]
            names = ", ".join(r.name for r in refs if r.symbol != module) or None
            return ProviderError(kind, diagnostic, module, names, refs[0] if refs else None)
        if kind is Kind.MISSING_NAME:
            module = groups["module"] or ""
            if not self.is_provider(module):
                return None
            roles = {"import", "module-attribute"}
            refs = [r for r in self.refs(diagnostic, roles) if r.name == detail]
            symbol = f"{module}.{detail}"
            return ProviderError(kind, diagnostic, symbol, detail, refs[0] if refs else None)
        if kind is Kind.MISSING_ATTRIBUTE:
            owner = _short(groups["owner"] or "")
            for ref in self.refs(diagnostic, {"attribute"}):
                if ref.name == detail and not ref.found and _short(ref.owner or "") == owner:
                    return ProviderError(kind, diagnostic, ref.symbol, detail, ref)
            return None
        callee = _first_quoted(groups.get("callee"))
        calls = self.refs(diagnostic, {"call"})
        named = [ref for ref in calls if callee is None or ref.name == callee]
        if not named and calls and callee is not None:
            # A constructor reached through an alias or a `type[...]` value.
            named = [ref for ref in calls if _short(ref.symbol) == callee]
        if not named:
            return None
        ref = named[0]
        if kind is Kind.MISSING_ARGUMENT and detail is not None:
            detail = ", ".join(re.findall(r'"([^"]+)"', detail)) or detail
        return ProviderError(kind, diagnostic, ref.symbol, detail, ref)
