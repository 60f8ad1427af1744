"""Reading source trees for the audit: their packages, modules, names and declared pins."""

from __future__ import annotations

import configparser
import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.metadata import RawMetadata, parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from patchwheel.audit.engine import ConsumerModule
from patchwheel.errors import AuditError

_SKIP_DIRS = {"__pycache__", "tests", "test"}


def _pkg_info(root: Path) -> RawMetadata | None:
    for candidate in (
        root / "PKG-INFO",
        *sorted(root.glob("*.egg-info/PKG-INFO")),
        *sorted(root.glob("src/*.egg-info/PKG-INFO")),
    ):
        if candidate.is_file():
            return parse_email(candidate.read_text(encoding="utf-8"))[0]
    return None


def _pyproject(root: Path) -> dict[str, object]:
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    return project if isinstance(project, dict) else {}


def project_name(root: Path) -> str | None:
    """The distribution name a source tree declares (PKG-INFO, pyproject.toml or setup.cfg)."""
    info = _pkg_info(root)
    if info is not None and info.get("name"):
        return info["name"]
    name = _pyproject(root).get("name")
    if isinstance(name, str):
        return name
    setup_cfg = root / "setup.cfg"
    if setup_cfg.is_file():
        parser = configparser.ConfigParser()
        parser.read(setup_cfg, encoding="utf-8")
        if parser.has_option("metadata", "name"):
            return parser.get("metadata", "name")
    return None


def _top_level_names(root: Path) -> list[str]:
    for top_level in (
        *sorted(root.glob("*.egg-info/top_level.txt")),
        *sorted(root.glob("src/*.egg-info/top_level.txt")),
    ):
        names = [line.strip() for line in top_level.read_text().splitlines() if line.strip()]
        if names:
            return names
    name = project_name(root)
    return [re.sub(r"[-.]+", "_", name).lower()] if name else []


def top_level_packages(root: Path, names: Sequence[str] | None = None) -> tuple[Path, ...]:
    """The directories of a source tree's top-level packages (flat or ``src/`` layout).

    `names` default to the tree's ``top_level.txt`` (sdists) or its normalized project name.
    """
    wanted = list(names) if names else _top_level_names(root)
    found: list[Path] = []
    for name in wanted:
        for base in (root / "src", root):
            candidate = base / name
            if (candidate / "__init__.py").is_file():
                found.append(candidate)
                break
    if not found:
        raise AuditError(
            f"no Python package {', '.join(wanted) or '(unnamed)'} found in {root} (looked in "
            "src/ and the tree root): name the packages to audit explicitly"
        )
    return tuple(found)


def consumer_modules(package_dirs: Sequence[Path]) -> tuple[ConsumerModule, ...]:
    """Every module of the consumer's packages, with its import name."""
    return tuple(_modules(package_dirs))


def _modules(package_dirs: Sequence[Path]) -> Iterator[ConsumerModule]:
    for package in package_dirs:
        base = package.resolve().parent
        for path in sorted(package.resolve().rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if any(part in _SKIP_DIRS for part in parts[1:-1]):
                continue
            if not all(part.isidentifier() for part in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ConsumerModule(path, ".".join(parts))


def _requirements(root: Path) -> list[str]:
    """Every requirement the tree declares, extras included (PKG-INFO, else pyproject.toml)."""
    info = _pkg_info(root)
    if info is not None and info.get("requires_dist"):
        return list(info.get("requires_dist", []))
    project = _pyproject(root)
    groups = [project.get("dependencies", [])]
    optional = project.get("optional-dependencies", {})
    if isinstance(optional, dict):
        groups += list(optional.values())
    return [str(r) for group in groups if isinstance(group, list) for r in group]


def declared_pin(consumer_root: Path, provider: str) -> str:
    """The exact provider version the consumer declares (``vllm==0.11.0``), as a pin."""
    wanted = canonicalize_name(provider)
    pins: set[str] = set()
    seen: list[str] = []
    for line in _requirements(consumer_root):
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != wanted:
            continue
        seen.append(line)
        exact = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
        if len(exact) == 1 and "*" not in exact[0]:
            pins.add(f"{provider}=={exact[0]}")
    if len(pins) != 1:
        found = "; ".join(seen) if seen else "no requirement on it"
        raise AuditError(
            f"{consumer_root} does not declare one exact {provider} version ({found}): "
            f"pass the baseline explicitly, e.g. --baseline {provider}==X.Y.Z"
        )
    return pins.pop()


def relative(path: Path, root: Path) -> str:
    """`path` relative to the tree `root`, as a POSIX string (as it is when outside it)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def source_line(path: Path, line: int) -> str:
    """The stripped text of line `line` of `path` ("" when it cannot be read)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


@dataclass(frozen=True)
class Roots:
    """The three trees of an audit (consumer, new provider, baseline provider) and the new
    provider's package directories: where findings' paths are relative to."""

    consumer: Path
    provider: Path
    baseline: Path
    provider_dirs: tuple[Path, ...]
