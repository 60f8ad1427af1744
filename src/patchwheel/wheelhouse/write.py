"""The wheelhouse lock (``wheelhouse.lock.json``) and the folder: wheels, requirements.txt,
SHA256SUMS, join.py and INSTALL.txt, written beside the old folder and swapped in.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import shutil
import textwrap
import time
from pathlib import Path
from typing import Any

from patchwheel import __version__, atomic, console
from patchwheel.errors import ConfigError, HashMismatchError
from patchwheel.http import configured_index_urls, redact
from patchwheel.index import outputs
from patchwheel.manifest import Manifest
from patchwheel.upstream.cache import sha256_file
from patchwheel.wheelhouse import closure, join, resolve
from patchwheel.wheelhouse.check import relied_on
from patchwheel.wheelhouse.plan import Carried, Options, Plan

SCHEMA = 1
LOCK_NAME = "wheelhouse.lock.json"
STALE_S = 3600


def make_lock(
    manifest: Manifest,
    options: Options,
    plan: Plan,
    carried: list[Carried],
    graph: closure.Graph,
) -> dict[str, Any]:
    """wheelhouse.lock.json: what is carried, why, from where, for which destination."""
    accepted = [
        {**m.__dict__, "accepted": True}
        for m in closure.installed_mismatches(graph, plan.installed)
        if m.name in plan.accepted
    ]
    for name in sorted(set(plan.accepted) - {m["name"] for m in accepted}):
        console.status(
            f"[yellow]note:[/] --accept-installed {name}: no requirement of the wheelhouse "
            f"excludes the installed {name} {plan.accepted[name]}; the flag is not needed"
        )
    destination = options.destination
    return {
        "schema": SCHEMA,
        "target": manifest.target,
        "inputs": manifest.inputs,
        "patchwheel": __version__,
        "resolver": resolve.uv_version(),
        "destination": {
            "python-version": destination.python_version,
            "platform": destination.platform,
            "implementation": "cp",
        },
        "exclude-newer": plan.cutoff,
        "exclude-newer-from": plan.cutoff_source,
        # the lock travels (and serve serves it): an index's user info (a token) is redacted
        "indexes": [redact(url) for url in configured_index_urls()],
        "requirements": [{"requirement": r.requirement, "why": r.reason} for r in plan.roots],
        "installed": {
            "file": plan.installed.source or None,
            "sha256": plan.installed.sha256 or None,
            "relied-on": relied_on(plan, graph),
            "replaced": [{"name": n, "installed": v} for n, v in sorted(plan.replaced.items())],
            "accepted-mismatches": accepted,
        },
        "dropped": [
            {
                "name": n,
                "why": why,
                "required-by": graph.parents(n),
                **(plan.drop_details[n].as_json() if n in plan.drop_details else {}),
            }
            for n, why in sorted(plan.dropped.items())
        ],
        "wheels": [c.as_json() for c in sorted(carried, key=lambda c: c.name)],
        "total-size": sum(c.size for c in carried),
        "install": install_commands(manifest.target),
        "environment-variables": [v.as_json() for v in plan.environment],
        "split": None,
    }


def install_commands(target: str) -> dict[str, Any]:
    """The offline install commands, run inside the wheelhouse folder."""
    pip = "python3 -m pip install --no-index --no-deps --find-links . -r requirements.txt"
    return {
        "check": "python3 join.py",
        "environment": pip,
        "beside": [
            f"SITE=$HOME/{target}-site",
            f'{pip} --target "$SITE"',
            'export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"',
        ],
    }


def write_folder(
    out: Path, carried: list[Carried], lock: dict[str, Any], split: int | None
) -> None:
    """Write the wheelhouse beside ``out`` and rename it into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _sweep(out)
    foreign = _foreign(out)
    if foreign:
        raise ConfigError(
            f"{out} exists and is not a wheelhouse this command wrote (it holds "
            f"{', '.join(foreign[:3])}{' …' if len(foreign) > 3 else ''}, which its lock does "
            "not list); it is replaced whole, so choose another --out or empty it"
        )
    staging = out.parent / f".{out.name}.tmp-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        for item in carried:
            assert item.path is not None
            dest = staging / item.filename
            outputs.place(item.path, dest)
            if sha256_file(dest) != item.sha256:
                raise HashMismatchError(
                    f"{item.path}: sha256 changed while placing {item.filename}; re-run"
                )
        atomic.write_text(staging / "requirements.txt", _requirements(carried))
        join.write_sums(staging, [(c.filename, c.sha256) for c in carried])
        join.install_join_script(staging)
        if split:
            try:
                names = join.split_dir(staging, split)
            except join.PartsError as exc:
                raise ConfigError(f"--split: {exc}") from exc
            lock["split"] = {"part-size": split, "files": names} if names else None
        atomic.write_text(staging / "INSTALL.txt", install_text(lock))
        atomic.write_json(staging / LOCK_NAME, lock)
        _swap(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _foreign(out: Path) -> list[str]:
    """What in an existing ``out`` a wheelhouse did not write (empty: ``out`` may be replaced).

    Ours: the fixed files, the wheels its lock lists and their split parts; nothing else, no
    folder, no link. A folder without a readable lock is foreign whole unless empty.
    """
    if not out.exists() and not out.is_symlink():
        return []
    if out.is_symlink() or not out.is_dir():
        return [out.name]
    entries = sorted(out.iterdir())
    if not entries:
        return []
    try:
        lock = json.loads((out / LOCK_NAME).read_text("utf-8"))
        wheels = {str(w["filename"]) for w in lock["wheels"]}
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return [p.name for p in entries]
    ours = wheels | {LOCK_NAME, "requirements.txt", "INSTALL.txt", join.SUMS, join.MANIFEST}
    ours.add("join.py")
    part = re.compile(r"(.+)\.\d{3}")
    return [
        p.name
        for p in entries
        if p.is_symlink()
        or not p.is_file()
        or not (p.name in ours or ((m := part.fullmatch(p.name)) and m.group(1) in wheels))
    ]


def _sweep(out: Path) -> None:
    cutoff = time.time() - STALE_S
    for path in out.parent.glob(f".{out.name}.*-*"):
        if path.is_dir() and path.stat().st_mtime < cutoff:
            shutil.rmtree(path, ignore_errors=True)


def _swap(staging: Path, out: Path) -> None:
    old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
    if out.exists():
        out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _requirements(carried: list[Carried]) -> str:
    lines = ["# Every wheel of this wheelhouse; install with --no-index --no-deps (INSTALL.txt)."]
    for item in sorted(carried, key=lambda c: c.name):
        why = item.requested or "dependency of " + ", ".join(item.dependency_of)
        lines.append(f"{item.name}=={item.version} --hash=sha256:{item.sha256}  # {why}")
    return "\n".join(lines) + "\n"


def install_text(lock: dict[str, Any]) -> str:
    """INSTALL.txt: what the folder is and the exact commands that install it offline."""
    wheels = lock["wheels"]
    dest = lock["destination"]
    commands = lock["install"]
    relied = lock["installed"]["relied-on"]
    accepted = lock["installed"]["accepted-mismatches"]
    replaced = lock["installed"]["replaced"]
    built = [w for w in wheels if (w["why"]["requested"] or "").startswith("built wheel")]
    when = lock["exclude-newer"] or "resolution time"
    lines = [
        f"Offline wheelhouse of target {lock['target']}: {len(wheels)} wheels, "
        f"{console.human_bytes(lock['total-size'])}, for CPython {dest['python-version']} "
        f"on {dest['platform']}.",
        f"Built wheels: {', '.join(w['filename'] for w in built) or 'none'}.",
        f"Dependencies resolved as of {when} ({lock['exclude-newer-from']}) by "
        f"{lock['resolver']}; every file, its sha256 and why it is here: {LOCK_NAME}.",
        "",
    ]
    if lock["installed"]["file"]:
        names = ", ".join(f"{r['name']} {r['version'] or '(version unknown)'}" for r in relied)
        lines += [
            f"Not carried, because the destination has them ({lock['installed']['file']}):",
            _wrap(names or "none"),
            "",
        ]
    for item in accepted:
        lines.append(
            f"Accepted mismatch: {item['required_by']} requires {item['requirement']}, "
            f"the destination keeps {item['name']} {item['installed']}."
        )
    for item in replaced:
        lines.append(f"Carried although installed: {item['name']} (installed {item['installed']}).")
    split = lock.get("split")
    lines += [
        "",
        "1. Copy this folder to the destination and go into it (cd).",
        "2. Check every file (and join the parts of split files): python3 join.py"
        + (
            f"\n   ({len(split['files'])} large file(s) arrive as NAME.001, NAME.002 …; without "
            "Python: cat NAME.[0-9][0-9][0-9] > NAME for each, then sha256sum -c SHA256SUMS)"
            if split
            else "\n   (without Python: sha256sum -c SHA256SUMS)"
        ),
        "3a. Install into the Python that has the destination's packages (its torch):",
        f"    {commands['environment']}",
        "3b. Or install beside them, leaving that environment untouched:",
        *(f"    {line}" for line in commands["beside"]),
        '4. Check: python3 -c "import importlib.metadata as m; print('
        + ", ".join(f"m.version('{w['name']}')" for w in built)
        + ')"',
        *environment_step(lock.get("environment-variables", [])),
        "",
    ]
    return "\n".join(lines)


def environment_step(variables: list[dict[str, str]]) -> list[str]:
    """Step 5 of INSTALL.txt: the variables to set where the wheels run (from the target's
    wheelhouse.toml ``[environment]``), or that none is needed besides step 3b's PYTHONPATH."""
    if not variables:
        return [
            "5. Environment: nothing to set (besides PYTHONPATH, if you installed as in 3b).",
        ]
    lines = ["5. Environment: set these wherever the wheels run:"]
    for variable in variables:
        lines.append(f"    export {variable['name']}={shlex.quote(variable['value'])}")
        lines.append(f"    #   {variable['why']}")
    return lines


def _wrap(text: str, width: int = 96) -> str:
    return textwrap.fill(text, width=width, initial_indent="  ", subsequent_indent="  ")
