"""Variants upstream did not build: what a rebase or a roll does when the new version has no
wheel of a variant.

Each variant may declare its answer in target.toml (``[projects.P.variants.V] missing =
"keep" | "drop"``); ``--missing V=keep|drop`` answers for one run. ``keep``: the variant stays at
its old pin (the build audits it against its own files, the consumer set says it is older);
``drop``: the rolled target leaves it out (its table, the extras and consumer set that name it).
Without an answer the variant is dropped and a person is asked (exit status 1), with the exact
command that keeps it instead.

The target.toml of the result is edited line by line, like the pins (comments and layout stay);
the result is parsed and checked again before it is used.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from patchwheel.config.targets import MISSING_POLICIES, MissingPolicy, Target, Variant
from patchwheel.errors import ConfigError
from patchwheel.workspace import check_name

_TABLE = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\"'.-]+)\s*=")


@dataclass(frozen=True)
class MissingVariant:
    """A variant the new version has no wheel of, and what was done about it."""

    key: str  # the lock key, project:variant
    variant: str
    distribution: str
    version: str  # the version that has no wheel of it
    old_pin: str  # the variant's pin before (kept: its pin still)
    why: str  # what was looked at
    policy: MissingPolicy
    declared: str | None  # "target.toml", "--missing", or None: the default (drop and ask)

    @property
    def asks(self) -> bool:
        """Whether a person must answer (no policy was declared)."""
        return self.declared is None

    def sentence(self, output: str) -> str:
        """What happened, in one plain sentence."""
        if self.policy == "keep":
            done = f"kept at {self.old_pin} in {output} ({self.declared} says keep)"
        elif self.declared is not None:
            done = f"dropped from {output} ({self.declared} says drop)"
        else:
            done = (
                f"dropped from {output}: target.toml declares no `missing` policy for it, "
                "so a person decides"
            )
        return (
            f"variant {self.variant}: upstream built no {self.distribution} {self.version} "
            f"({self.why}); {done}"
        )

    def comment(self) -> str:
        """The line target.toml keeps where a dropped variant's table was."""
        how = f"{self.declared} says drop" if self.declared else "no `missing` policy declared"
        return (
            f"# variant {self.variant} dropped: upstream built no {self.distribution} "
            f"{self.version} ({how}; see the roll or rebase report)"
        )

    def to_dict(self) -> dict[str, Any]:
        """The report's record."""
        return {**asdict(self), "asks": self.asks}


def from_dict(data: Mapping[str, Any]) -> MissingVariant:
    """A record written by :meth:`MissingVariant.to_dict`."""
    names = {f.name for f in fields(MissingVariant)}
    return MissingVariant(**{k: v for k, v in data.items() if k in names})


def parse_overrides(texts: Sequence[str], target: Target) -> dict[str, MissingPolicy]:
    """``--missing V=keep|drop`` (V a variant name or ``project:variant``, each a name by the
    name rule), by lock key."""
    out: dict[str, MissingPolicy] = {}
    variants = {v.spec.key: v for p in target.projects for v in p.variants}
    for text in texts:
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        for part in name.split(":", 1):
            check_name(part, "--missing: variant")
        policy = next((p for p in MISSING_POLICIES if p == value), None)
        if not sep or policy is None:
            raise ConfigError(
                f"--missing {text!r}: write VARIANT=keep or VARIANT=drop (e.g. --missing cpu=keep)"
            )
        keys = [k for k, v in variants.items() if name in (k, v.name)]
        if len(keys) != 1:
            known = ", ".join(sorted(variants)) or "none"
            raise ConfigError(
                f"--missing {text!r}: target {target.name} has "
                f"{'no' if not keys else 'several'} variant(s) named {name!r} (it has: {known}); "
                "name it as project:variant"
            )
        if keys[0] in out and out[keys[0]] != policy:
            raise ConfigError(f"--missing: {keys[0]} is given twice with different answers")
        out[keys[0]] = policy
    return out


def decide(
    variant: Variant,
    version: str,
    why: str,
    overrides: Mapping[str, MissingPolicy],
) -> MissingVariant:
    """What to do with ``variant``, which has no wheel of ``version``."""
    key = variant.spec.key
    if key in overrides:
        policy, declared = overrides[key], "--missing"
    elif variant.missing is not None:
        policy, declared = variant.missing, "target.toml"
    else:
        policy, declared = "drop", None
    return MissingVariant(
        key=key,
        variant=variant.name,
        distribution=variant.distribution,
        version=version,
        old_pin=variant.spec.pin.text,
        why=why,
        policy=policy,
        declared=declared,
    )


def keep_command(
    missing: Sequence[MissingVariant],
    *,
    target: str,
    output: str,
    rerun: Sequence[str],
    undo: str = "",
) -> str:
    """The exact command that redoes the move keeping the variants dropped by default.

    ``rerun``: the command that made the move (``nox -s roll -- --target T --to V …``). What the
    move wrote goes first: ``undo`` when the move has its own (a roll, in progress until it is
    green or aborted: ``nox -s roll -- --target T --abort``); else a new target is removed and a
    target rebased in place is restored from git (the move replaced patches/T).
    """
    asked = [m for m in missing if m.asks]
    undo = undo or (
        f"rm -r patches/{shlex.quote(output)} vendor/{shlex.quote(output)}"
        if output != target
        else f"git checkout -- patches/{shlex.quote(target)}"
    )
    keep = " ".join(f"--missing {m.variant}=keep" for m in asked)
    return f"{undo} && {' '.join(rerun)} {keep}"


def make_rule(missing: Sequence[MissingVariant], target: str) -> str:
    """Where to declare the answer once and for all."""
    tables = ", ".join(f"[projects.{m.key.replace(':', '.variants.')}]" for m in missing)
    return (
        f'or declare it for every roll: missing = "keep" (or "drop") in {tables} of '
        f"patches/{target}/target.toml"
    )


# --------------------------------------------------------------------------- target.toml


def drop_variants(text: str, dropped: Collection[MissingVariant], *, where: str) -> str:
    """``target.toml`` without the dropped variants: their tables, their entries in the
    channel's variants, the extras' references to them (an extra left empty goes) and the
    consumer tables of variant names no project builds any more; a comment marks each drop."""
    if not dropped:
        return text
    data = _parse(text, where)
    gone = {m.key: m for m in dropped}
    by_project: dict[str, set[str]] = {}
    for key in gone:
        project, _, variant = key.partition(":")
        by_project.setdefault(project, set()).add(variant)
    remaining = {
        vname
        for pname, pdata in dict(data.get("projects", {})).items()
        for vname in dict(pdata.get("variants", {}))
        if vname not in by_project.get(pname, set())
    }
    consumers_gone = {v for variants in by_project.values() for v in variants if v not in remaining}
    out: list[str] = []
    skipping = False
    table: tuple[str, ...] = ()
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        header = _TABLE.match(line)
        if header:
            table = _table_path(header.group(1), where)
            skipping = False
            variant_table = (
                len(table) == 4 and table[0] == "projects" and table[2] == "variants"
            ) or (
                len(table) == 5 and table[0] == "projects" and table[2:4] == ("channel", "variants")
            )
            if variant_table and table[-1] in by_project.get(table[1], set()):
                skipping = True
                if len(table) == 4:
                    out.append(gone[f"{table[1]}:{table[3]}"].comment() + "\n")
                continue
            if len(table) == 2 and table[0] == "consumer" and table[1] in consumers_gone:
                skipping = True
                continue
            out.append(line)
            continue
        if skipping:
            if not line.strip() or line.lstrip().startswith("#"):
                rest = lines[index:]
                if all(not x.strip() or x.lstrip().startswith("#") for x in _until_header(rest)):
                    skipping = False  # the comments before the next table are that table's
                    out.append(line)
            continue
        out.append(_edit_line(line, table, by_project, where))
    new_text = "".join(line for line in out if line is not None)
    _check_dropped(_parse(new_text, where), by_project, where)
    return new_text


def _until_header(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if _TABLE.match(line):
            break
        out.append(line)
    return out


def _edit_line(
    line: str, table: tuple[str, ...], by_project: Mapping[str, set[str]], where: str
) -> str:
    """One line of a kept table, with references to dropped variants taken out."""
    assign = _ASSIGN.match(line)
    if assign is None:
        return line
    if len(table) == 3 and table[0] == "projects" and table[2] == "extras":
        value = _line_value(line, where)
        refs = next(iter(value.values()))
        if not isinstance(refs, list):
            return line
        kept = [r for r in refs if not _names_dropped(r, by_project)]
        if kept == refs:
            return line
        if not kept:
            return ""
        name = next(iter(value))
        return f"{name} = [{', '.join(_quote(r) for r in kept)}]\n"
    if len(table) == 4 and table[0] == "projects" and table[2:] == ("channel", "variants"):
        value = _line_value(line, where)
        if next(iter(value)) in by_project.get(table[1], set()):
            return ""
    return line


def _names_dropped(ref: object, by_project: Mapping[str, set[str]]) -> bool:
    if not isinstance(ref, str) or ":" not in ref:
        return False
    project, _, variant = ref.partition(":")
    return variant in by_project.get(project, set())


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _line_value(line: str, where: str) -> dict[str, Any]:
    try:
        value = tomllib.loads(line)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{where}: cannot read the line {line.strip()!r} on its own ({exc}); write each "
            "extra and channel variant on one line, or drop the variant from target.toml by hand"
        ) from exc
    if len(value) != 1:
        raise ConfigError(f"{where}: cannot read the line {line.strip()!r}")
    return value


def _table_path(inner: str, where: str) -> tuple[str, ...]:
    try:
        data: Any = tomllib.loads(f"[{inner}]\n")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: cannot read table header [{inner}]: {exc}") from exc
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        name = next(iter(data))
        path.append(name)
        data = data[name]
    return tuple(path)


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _check_dropped(data: dict[str, Any], by_project: Mapping[str, set[str]], where: str) -> None:
    for project, variants in by_project.items():
        table = data.get("projects", {}).get(project, {})
        left = set(table.get("variants", {})) & variants
        left |= set(table.get("channel", {}).get("variants", {})) & variants
        if left:
            raise ConfigError(
                f"{where}: could not take variant(s) {', '.join(sorted(left))} of {project} out "
                "(inline tables?); drop them from target.toml by hand"
            )
