"""``build/<target>/manifest.json``: what a build produced, as one typed record.

The build writes it (:func:`Manifest.to_json`, keys in a fixed order); the up-to-date check, the
union index, the wheelhouse, publish and both verify sessions read it (:func:`read`). Reading
asks only for what identifies a file (project, distribution, version, file name, sha256), so a
manifest another tool wrote with less is still read; everything else has the value a build
without it would record. Standard library only: the GPU session reads it too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAME = "manifest.json"
SCHEMA = 1
PIN_FIELDS = ("pin", "kind", "sha256", "filename", "size", "url", "rev", "commit")


class ManifestError(ValueError):
    """A manifest.json is not a JSON object of the shape patchwheel writes."""


@dataclass(frozen=True)
class PinEntry:
    """A locked pin, as the target's lock recorded it (``pins``)."""

    pin: str
    kind: str
    sha256: str | None = None
    filename: str | None = None
    size: int | None = None
    url: str | None = None
    rev: str | None = None
    commit: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, in lock order."""
        return {name: getattr(self, name) for name in PIN_FIELDS if getattr(self, name) is not None}


@dataclass(frozen=True)
class PatchEntry:
    """One patch of a project's series (``projects.<name>.patches``)."""

    name: str
    sha256: str
    subject: str
    fields: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The patch's JSON object."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "subject": self.subject,
            "fields": self.fields,
        }


@dataclass(frozen=True)
class ProjectEntry:
    """One project of the target: its build kind and its series."""

    build: str
    patches: tuple[PatchEntry, ...] = ()
    # the series as the target resolved it: its pool (or null) and every patch of it, applied
    # (to which variants) or left out by its gate, and why (patching/series.py)
    series: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The project's JSON object."""
        out: dict[str, Any] = {"build": self.build, "patches": [p.to_json() for p in self.patches]}
        if self.series is not None:
            out["series"] = self.series
        return out


@dataclass(frozen=True)
class WheelEntry:
    """One artifact of the build (``wheels``): a built wheel, or an upstream file copied.

    ``metadata_sha256`` is set once the PEP 658 ``<wheel>.metadata`` file is written (wheels
    only); then ``requires_python`` is recorded too, even when the wheel states none.
    """

    project: str
    distribution: str
    version: str
    filename: str
    sha256: str
    variant: str | None = None
    size: int | None = None
    patched: bool = False
    label: str | None = None
    build_key: str = ""
    action: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    metadata_sha256: str | None = None
    requires_python: str | None = None
    # its CUDA modules and their SASS/PTX architectures (kernels/scan.py); None: not read
    kernels: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The wheel's JSON object (``details`` only when there are any)."""
        data: dict[str, Any] = {
            "project": self.project,
            "variant": self.variant,
            "distribution": self.distribution,
            "version": self.version,
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
            "patched": self.patched,
            "label": self.label,
            "build-key": self.build_key,
            "action": self.action,
        }
        if self.details:
            data["details"] = self.details
        if self.metadata_sha256 is not None:
            data["metadata-sha256"] = self.metadata_sha256
            data["requires-python"] = self.requires_python
        if self.kernels is not None:
            data["kernels"] = self.kernels
        return data


@dataclass(frozen=True)
class Manifest:
    """What ``build/<target>`` holds and where it came from.

    ``consumer`` maps each file of the consumer set (constraints, INSTALL.md) to its sha256.
    """

    target: str
    wheels: tuple[WheelEntry, ...]
    description: str = ""
    patchwheel: str = ""
    inputs: str | None = None
    pins: dict[str, PinEntry] = field(default_factory=dict)
    projects: dict[str, ProjectEntry] = field(default_factory=dict)
    audit: dict[str, Any] | None = None
    consumer: dict[str, str] = field(default_factory=dict)
    schema: int = SCHEMA
    # How the target's speculators extracts: "generator" or "served" (config/targets.py). The
    # GPU session reads it here: it runs without target.toml's model.
    generation: str = "generator"
    # the GPUs the target's CUDA modules must run on and how each module does (config/gpu.py,
    # kernels/check.py); None: a manifest written before patchwheel read kernels
    gpu: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The manifest's JSON object, keys in the order manifest.json has them."""
        return {
            "schema": self.schema,
            "target": self.target,
            "description": self.description,
            "generation": self.generation,
            "patchwheel": self.patchwheel,
            "inputs": self.inputs,
            "pins": {key: pin.to_json() for key, pin in self.pins.items()},
            "projects": {name: project.to_json() for name, project in self.projects.items()},
            "wheels": [wheel.to_json() for wheel in self.wheels],
            "audit": self.audit,
            "consumer": self.consumer,
            "gpu": self.gpu,
        }

    @classmethod
    def from_json(cls, data: object) -> Manifest:
        """The manifest a JSON object describes; ManifestError names what is wrong."""
        top = _object(data, "the manifest")
        if "wheels" not in top:
            raise ManifestError("it lists no 'wheels'")
        wheels = _list(top["wheels"], "wheels")
        return cls(
            target=str(top.get("target", "")),
            wheels=tuple(_wheel(w, f"wheels[{i}]") for i, w in enumerate(wheels)),
            description=str(top.get("description", "")),
            patchwheel=str(top.get("patchwheel", "")),
            inputs=_optional_str(top.get("inputs")),
            pins={
                str(k): _pin(v, f"pins.{k}")
                for k, v in _object(top.get("pins", {}), "pins").items()
            },
            projects={
                str(k): _project(v, f"projects.{k}")
                for k, v in _object(top.get("projects", {}), "projects").items()
            },
            audit=_object(top["audit"], "audit") if top.get("audit") is not None else None,
            consumer={
                str(k): str(v) for k, v in _object(top.get("consumer", {}), "consumer").items()
            },
            schema=int(top.get("schema", SCHEMA)),
            generation=_generation(top.get("generation", "generator")),
            gpu=_object(top["gpu"], "gpu") if top.get("gpu") is not None else None,
        )


def path_in(target_dir: Path) -> Path:
    """Where a target's manifest lies: ``build/<target>/manifest.json``."""
    return target_dir / NAME


def read(path: Path) -> Manifest:
    """Read a manifest.json (OSError if it cannot be read; ManifestError if it is malformed)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except ValueError as exc:
        raise ManifestError(f"not JSON: {exc}") from exc
    return Manifest.from_json(data)


def _generation(value: object) -> str:
    if value not in ("generator", "served"):
        raise ManifestError(f"generation {value!r} is neither 'generator' nor 'served'")
    return str(value)


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where} is not a JSON object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ManifestError(f"{where} is not a list")
    return value


def _required(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ManifestError(f"{where} has no {key!r}")
    return value


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def _wheel(value: object, where: str) -> WheelEntry:
    data = _object(value, where)
    size = data.get("size")
    return WheelEntry(
        project=_required(data, "project", where),
        distribution=_required(data, "distribution", where),
        version=_required(data, "version", where),
        filename=_required(data, "filename", where),
        sha256=_required(data, "sha256", where),
        variant=_optional_str(data.get("variant")),
        size=int(size) if size is not None else None,
        patched=bool(data.get("patched", False)),
        label=_optional_str(data.get("label")),
        build_key=str(data.get("build-key", "")),
        action=str(data.get("action", "")),
        details=_object(data.get("details", {}), f"{where}.details"),
        metadata_sha256=_optional_str(data.get("metadata-sha256")),
        requires_python=_optional_str(data.get("requires-python")),
        kernels=(
            _object(data["kernels"], f"{where}.kernels")
            if data.get("kernels") is not None
            else None
        ),
    )


def _pin(value: object, where: str) -> PinEntry:
    data = _object(value, where)
    size = data.get("size")
    return PinEntry(
        pin=_required(data, "pin", where),
        kind=_required(data, "kind", where),
        sha256=_optional_str(data.get("sha256")),
        filename=_optional_str(data.get("filename")),
        size=int(size) if size is not None else None,
        url=_optional_str(data.get("url")),
        rev=_optional_str(data.get("rev")),
        commit=_optional_str(data.get("commit")),
    )


def _project(value: object, where: str) -> ProjectEntry:
    data = _object(value, where)
    patches = _list(data.get("patches", []), f"{where}.patches")
    series = data.get("series")
    return ProjectEntry(
        build=str(data.get("build", "")),
        patches=tuple(_patch(p, f"{where}.patches[{i}]") for i, p in enumerate(patches)),
        series=_object(series, f"{where}.series") if series is not None else None,
    )


def _patch(value: object, where: str) -> PatchEntry:
    data = _object(value, where)
    fields = _object(data.get("fields", {}), f"{where}.fields")
    return PatchEntry(
        name=_required(data, "name", where),
        sha256=_required(data, "sha256", where),
        subject=str(data.get("subject", "")),
        fields={str(k): str(v) for k, v in fields.items()},
    )
