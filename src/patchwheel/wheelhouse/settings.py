"""Two tables of ``wheelhouse.toml`` that travel to the destination: what is dropped (and
under which import names the GPU session's import trace looks for it), and the environment
variables a user sets there (written into INSTALL.txt as a step).

    [drop]
    deepspeed = "why it is not needed"                      # imported as `deepspeed`
    nvidia-cutlass-dsl = { why = "…", imports = ["cutlass"], tolerated-by = ["flashinfer"] }

    [environment]
    NAME = { value = "…", why = "…" }

A dropped requirement's ``imports`` are its top-level modules (default: its name with ``-`` as
``_``); ``tolerated-by`` names the top-level packages whose failed import of it is part of their
design (a ``try: import … except ImportError``): the trace may show them looking for it, never
anything importing it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import NormalizedName, canonicalize_name

from patchwheel.errors import ConfigError

MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VARIABLE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
DROP_KEYS = {"why", "imports", "tolerated-by"}


@dataclass(frozen=True)
class Dropped:
    """A requirement left out of the wheelhouse, and how to recognise it being imported."""

    name: NormalizedName
    why: str
    imports: tuple[str, ...]
    tolerated_by: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """Its fields in wheelhouse.lock.json's ``dropped`` entry."""
        return {"imports": list(self.imports), "tolerated-by": list(self.tolerated_by)}


@dataclass(frozen=True)
class Variable:
    """An environment variable users of the wheelhouse set (INSTALL.txt says so)."""

    name: str
    value: str
    why: str

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "value": self.value, "why": self.why}


def default_imports(name: str) -> tuple[str, ...]:
    """The import name a distribution most often has: its name with ``-`` and ``.`` as ``_``."""
    return (re.sub(r"[-.]+", "_", canonicalize_name(name)),)


def parse_drop(table: Any, path: Path) -> dict[NormalizedName, Dropped]:
    """``[drop]``: NAME = "why" or NAME = {why, imports, tolerated-by}."""
    if not isinstance(table, dict):
        raise ConfigError(f'{path}: `drop` is a table of NAME = "why it is not needed"')
    out: dict[NormalizedName, Dropped] = {}
    for raw, value in table.items():
        name = canonicalize_name(raw)
        if isinstance(value, str):
            out[name] = Dropped(name, value, default_imports(raw))
            continue
        if not isinstance(value, dict) or not isinstance(value.get("why"), str):
            raise ConfigError(
                f"{path}: drop.{raw} is a string (why) or a table with `why` "
                "(and optional `imports`, `tolerated-by`: lists of module names)"
            )
        unknown = sorted(set(value) - DROP_KEYS)
        if unknown:
            raise ConfigError(
                f"{path}: drop.{raw}: unknown key(s) {unknown}; allowed: "
                + ", ".join(sorted(DROP_KEYS))
            )
        imports = _modules(value.get("imports"), f"{path}: drop.{raw}.imports")
        tolerated = _modules(value.get("tolerated-by", []), f"{path}: drop.{raw}.tolerated-by")
        out[name] = Dropped(name, value["why"], imports or default_imports(raw), tolerated)
    return out


def parse_environment(table: Any, path: Path) -> tuple[Variable, ...]:
    """``[environment]``: NAME = {value, why}."""
    if not isinstance(table, dict):
        raise ConfigError(f'{path}: `environment` is a table of NAME = {{value = "…", why = "…"}}')
    out = []
    for name, value in table.items():
        if not VARIABLE.match(name):
            raise ConfigError(f"{path}: environment.{name}: not an environment variable name")
        if (
            not isinstance(value, dict)
            or set(value) != {"value", "why"}
            or not all(isinstance(v, str) for v in value.values())
        ):
            raise ConfigError(
                f'{path}: environment.{name} is a table {{value = "…", why = "…"}} (strings)'
            )
        if any(c in value["value"] for c in "\n\r\0"):
            raise ConfigError(f"{path}: environment.{name}: the value holds a line break")
        out.append(Variable(name, value["value"], value["why"]))
    return tuple(out)


def _modules(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(v, str) and MODULE.match(v) for v in value
    ):
        raise ConfigError(f"{where}: a list of top-level module names")
    return tuple(value)
