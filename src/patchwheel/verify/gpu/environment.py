"""The environment of the GPU session's child processes: what a user has, nothing more.

A child (the wheels' python running speculators, vLLM or transformers) gets the session's own
environment plus only:

- ``user``: the variables INSTALL.txt tells a user to set (the wheelhouse's INSTALL.txt, read
  here: its ``export NAME=VALUE`` lines; PYTHONPATH only as step 3b's install site);
- ``trace``: the import trace (``PATCHWHEEL_IMPORT_TRACE`` and its folder on PYTHONPATH), which
  records imports and changes nothing else;
- ``hygiene``: for the harness's own measurements only (never the user's job), each listed in
  ``HYGIENE`` with why it changes no behaviour of the code under test.

``check`` refuses anything else, naming the variable: a setting only the harness knows would
hide a defect of the user's path (issue 22: ``VLLM_USE_FLASHINFER_SAMPLER=0`` did). Every child
environment of the session is made by ``child_env`` and checked before it is used; the report
lists what was set and under which rule (``describe``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from patchwheel.errors import VerifyError
from patchwheel.verify.payloads import IMPORT_TRACE

TRACE_VARIABLE = "PATCHWHEEL_IMPORT_TRACE"
TRACE_DIR = IMPORT_TRACE
# The session's own sources (``PYTHONPATH=src python3 -m patchwheel.verify.gpu``, or nox's):
# the session needs them, its children do not, and no user has them: taken off their path.
SESSION_SRC = Path(__file__).resolve().parents[3]
# Measurement hygiene: allowed in the harness's own runs, because none changes what the code
# under test does on this machine.
HYGIENE: dict[str, str] = {
    "PYTHONUNBUFFERED": "log lines reach the run's log as they are written",
    "VLLM_NO_USAGE_STATS": "vLLM's usage report off (telemetry; the machine has no network)",
    "DO_NOT_TRACK": "telemetry off (the machine has no network)",
    "HF_HUB_OFFLINE": "no Hugging Face Hub lookups: every model is a local folder and the "
    "machine has no network, so a lookup could only time out",
    "TRANSFORMERS_OFFLINE": "as HF_HUB_OFFLINE, for transformers",
    "VLLM_CACHE_ROOT": "a private, empty compile cache per timed side: where compiled code is "
    "kept, not what is compiled (start-up is compared from cold caches)",
    "TORCHINDUCTOR_CACHE_DIR": "as VLLM_CACHE_ROOT, for inductor",
    "TRITON_CACHE_DIR": "as VLLM_CACHE_ROOT, for Triton",
    "PATCHWHEEL_LAUNCHED_AT": "when the side's process was launched; read only by patchwheel's "
    "timing script",
}
INHERITED_PREFIXES = ("VLLM_", "TORCH", "PYTORCH_", "HF_", "TRANSFORMERS_", "CUDA_", "NCCL_")
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
NOT_RECORDED = "(set; a secret: value not recorded)"
EXPORT = re.compile(r"^\s*export\s+([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass(frozen=True)
class UserEnvironment:
    """What INSTALL.txt tells a user to set: variables with their values, and whether step 3b
    puts an install site on PYTHONPATH."""

    source: str
    variables: dict[str, str] = field(default_factory=dict)
    pythonpath_site: bool = False


def from_install_txt(path: Path) -> UserEnvironment:
    """The ``export`` lines of a wheelhouse's INSTALL.txt (PYTHONPATH: step 3b's site)."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise VerifyError(
            f"{path}: cannot read the wheelhouse's INSTALL.txt ({exc}); the session runs "
            "with the environment it gives users, so it needs it (rebuild the wheelhouse)"
        ) from exc
    variables: dict[str, str] = {}
    site = False
    for number, line in enumerate(text.splitlines(), 1):
        match = EXPORT.match(line)
        if match is None:
            continue
        name, raw = match.groups()
        if name == "PYTHONPATH":
            site = True
            continue
        try:
            words = shlex.split(raw)
        except ValueError as exc:
            raise VerifyError(f"{path}:{number}: cannot read `export {name}=…` ({exc})") from exc
        if len(words) != 1:
            raise VerifyError(f"{path}:{number}: `export {name}=…` is not one plain value")
        variables[name] = words[0]
    return UserEnvironment(str(path), variables, site)


def no_wheelhouse(site_on_path: bool) -> UserEnvironment:
    """Installed from the build's index (README's commands): no variable to set; with
    ``--use-system-torch`` the session's own install site goes on PYTHONPATH."""
    return UserEnvironment("README's install commands (no wheelhouse)", {}, site_on_path)


@dataclass(frozen=True)
class Allowed:
    """What a child of one kind may get beyond the session's environment."""

    user: UserEnvironment
    site: Path | None
    hygiene: bool
    trace: bool = True
    extra_paths: tuple[str, ...] = ()  # a comparison's own install ("extraction-before")

    def paths(self) -> list[str]:
        paths = list(self.extra_paths)
        if self.site is not None and self.user.pythonpath_site:
            paths.append(str(self.site))
        if self.trace:
            paths.append(str(TRACE_DIR))
        return paths


def child_env(
    base: Mapping[str, str],
    allowed: Allowed,
    *,
    trace_dir: Path | None = None,
    hygiene: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The session's environment plus INSTALL.txt's variables, the install site, the trace
    (when ``trace_dir``) and the given hygiene variables; checked."""
    env = dict(base)
    env.update(allowed.user.variables)
    front = list(allowed.extra_paths)
    if allowed.site is not None and allowed.user.pythonpath_site:
        front.append(str(allowed.site))
    if trace_dir is not None:
        front.append(str(TRACE_DIR))
        env[TRACE_VARIABLE] = str(trace_dir)
    rest = _without_session(_entries(base.get("PYTHONPATH")))
    if front or rest != _entries(base.get("PYTHONPATH")):
        env["PYTHONPATH"] = os.pathsep.join([*front, *rest])
        if not env["PYTHONPATH"]:
            del env["PYTHONPATH"]
    env.update(hygiene or {})
    check(env, base, allowed)
    return env


def check(env: Mapping[str, str], base: Mapping[str, str], allowed: Allowed) -> None:
    """Refuse a child environment that sets (or unsets) anything the rules do not allow."""
    wrong = violations(env, base, allowed)
    if wrong:
        raise VerifyError(
            "the session would run a child with settings a user does not have: "
            + "; ".join(wrong)
            + f". Users get only what {allowed.user.source} tells them to set; a variable "
            "the stack needs belongs there (the target's wheelhouse.toml [environment]), "
            "or the stack must not need it"
        )


def violations(env: Mapping[str, str], base: Mapping[str, str], allowed: Allowed) -> list[str]:
    """Each variable set, changed or unset against ``base`` that no rule allows."""
    wrong = []
    for name in sorted(set(env) | set(base)):
        old, new = base.get(name), env.get(name)
        if old == new:
            continue
        if name == "PYTHONPATH":
            kept = _without_session(_entries(old))
            added = [p for p in _entries(new) if p not in kept]
            stray = [p for p in added if p not in allowed.paths()]
            if stray or _entries(new)[len(added) :] != kept:
                wrong.append(f"PYTHONPATH={new} (allowed in front: {allowed.paths()})")
        elif new is None:
            wrong.append(f"{name} unset")
        elif name in allowed.user.variables:
            if new != allowed.user.variables[name]:
                wrong.append(f"{name}={new} (INSTALL.txt says {allowed.user.variables[name]})")
        elif (name == TRACE_VARIABLE and allowed.trace) or (name in HYGIENE and allowed.hygiene):
            continue
        else:
            wrong.append(f"{name}={new}")
    return wrong


def describe(env: Mapping[str, str], base: Mapping[str, str], allowed: Allowed) -> dict[str, str]:
    """Each variable this child gets beyond the session's environment, and its rule."""
    out = {}
    for name in sorted(env):
        if base.get(name) == env[name]:
            continue
        if name in allowed.user.variables or name == "PYTHONPATH":
            out[name] = f"user ({allowed.user.source})" + (
                " + import trace" if name == "PYTHONPATH" and allowed.trace else ""
            )
        elif name == TRACE_VARIABLE:
            out[name] = "import trace (records imports)"
        else:
            out[name] = f"hygiene: {HYGIENE.get(name, '?')}"
    return out


def inherited(base: Mapping[str, str]) -> dict[str, str]:
    """Variables of the caller's environment that steer the stack (vLLM, torch, CUDA, Hugging
    Face): passed on untouched, and listed in the report so that a reader sees them; a name that
    looks like a secret (HF_TOKEN) is listed without its value, which the report must not hold."""
    return {
        k: NOT_RECORDED if SECRET_NAME.search(k) else v
        for k, v in sorted(base.items())
        if k.startswith(INHERITED_PREFIXES)
    }


def _entries(value: str | None) -> list[str]:
    return [p for p in (value or "").split(os.pathsep) if p]


def _without_session(entries: list[str]) -> list[str]:
    return [p for p in entries if Path(p).resolve() != SESSION_SRC]
