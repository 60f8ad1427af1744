"""Nox sessions: each sets up its environment and makes one call into patchwheel.

nox -s build                      build the default target into build/
nox -s build -- --target vllm-0.16
nox -s tests                      the whole test suite (what CI runs)
nox -s quick                      the unit tests in parallel, no network (the everyday loop)
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["build"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"


def _install(session: nox.Session, *extras: str) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec)


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build a target's patched wheels, manifest and index into build/ (default target)."""
    _install(session)
    session.run("patchwheel", "build", *session.posargs)


@nox.session(python=PYTHON)
def lock(session: nox.Session) -> None:
    """Resolve new or changed pins into patches/<target>/target.lock."""
    _install(session)
    session.run("patchwheel", "lock", *session.posargs)


@nox.session(python=PYTHON)
def audit(session: nox.Session) -> None:
    """Static API-drift audit: the target's patched speculators against its vLLM pin."""
    _install(session)
    session.run("patchwheel", "audit", *session.posargs)


@nox.session(python=PYTHON)
def verify(session: nox.Session) -> None:
    """Build (or reuse) a target, then extract hidden states with its wheels on CPU."""
    _install(session, "verify")
    session.run("patchwheel", "build", *session.posargs)
    session.run("patchwheel", "verify", *session.posargs)


@nox.session(python=False)
def gpu(session: nox.Session) -> None:
    """Extraction on a CUDA GPU with the built wheels: families vs two oracles, training, speed.

    Runs with the machine's own python (PATCHWHEEL_GPU_PYTHON, default python3: the one with
    its CUDA torch) straight from this checkout, so an air-gapped machine needs nothing else:
    nox -s gpu -- --target vllm-0.26 --wheelhouse DIR --use-system-torch [--tp 2] [--stages …]
    """
    python = os.environ.get("PATCHWHEEL_GPU_PYTHON", "python3")
    src = str(Path(__file__).resolve().parent / "src")
    session.run(
        python,
        "-m",
        "patchwheel.verify.gpu",
        *session.posargs,
        env={"PYTHONPATH": src},
        external=True,
    )


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the whole test suite (unit, integration on real git repos, real wheels, real vLLM)."""
    _install(session, "test", "verify")
    args = session.posargs or ["-ra", "--durations=25"]
    session.run("pytest", *args, env={"PYTHONUNBUFFERED": "1", **_ci_env()})


# The unit tier (tests/tiers.py): no integration folder or heavy file, nothing that needs the
# network or takes minutes; every test fenced off the network. Parallel on every core.
QUICK = "not integration and not network and not slow"


@nox.session(python=PYTHON)
def quick(session: nox.Session) -> None:
    """The everyday loop: the unit tests, in parallel, no network (< 5 min on 2 cores on a fresh
    clone: python benchmarks/quick_tests.py). Arguments go to pytest: nox -s quick -- -x -k X."""
    _install(session, "test", "verify")
    args = ["-m", QUICK, "-n", "auto", "-q", "-ra", *session.posargs]
    session.run("pytest", *args, env={"PYTHONUNBUFFERED": "1", **_ci_env()})


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the manual (docs/, Sphinx + MyST) with every warning an error, after checking that
    docs/results/ and README's results lines are what the JSON under reports/ gives."""
    _install(session, "docs")
    session.run("python", "-m", "patchwheel.results", "--check")
    out = Path("docs") / "_build" / "html"
    session.run("sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out))
    session.log(f"the manual: {out / 'index.html'}")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint + format check), mypy --strict and the import-linter contracts: the hooks of
    .pre-commit-config.yaml (the same checks a commit runs once `pre-commit install` is done)."""
    _install(session, "lint")
    session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure")


def _ci_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("CI", "PATCHWHEEL_CACHE")}


@nox.session(python=PYTHON)
def publish(session: nox.Session) -> None:
    """Upload a target's wheels with twine: -- --target T --repository-url URL [--require-verified].

    Credentials: TWINE_USERNAME / TWINE_PASSWORD in the environment, or keyring; never arguments.
    """
    _install(session, "publish")
    session.run("patchwheel", "publish", *session.posargs)


@nox.session(python=PYTHON)
def wheelhouse(session: nox.Session) -> None:
    """One offline folder of a target's wheels and their dependency closure, for another machine.

    nox -s wheelhouse -- --target T [--python-version 3.12] [--platform TAG]
        [--exclude-newer DATE] [--installed FILE] [--split 60MiB] [--dry-run]
    """
    _install(session)
    session.run("patchwheel", "wheelhouse", *session.posargs)


@nox.session(python=PYTHON)
def rebase(session: nox.Session) -> None:
    """Rebase a target's patch series onto new pins (3-way, classified, resumable).

    nox -s rebase -- --target T --onto PIN [--onto PIN …] [--new-target NAME]
    nox -s rebase -- --target T --continue | --skip | --abort
    """
    _install(session)
    session.run("patchwheel", "rebase", *session.posargs)


@nox.session(python=PYTHON)
def roll(session: nox.Session) -> None:
    """Roll a target onto its channel's newest (or a given) revision: rebase, build, audit,
    bisect drift, verify on CPU, report (build/<target>/roll.md); exit 0 green, 1 a person is
    needed (the next command is printed), 2 an error.

    nox -s roll -- --target T [--to VERSION|COMMIT|latest] [--new-target NAME]
    nox -s roll -- --target T --continue | --skip | --abort
    """
    _install(session, "verify")
    try:
        session.run("patchwheel", "roll", *session.posargs)
    except nox.command.CommandFailed as exc:
        # nox reports every failure as 1; a scheduler wants 1 (a person) told from 2 (error).
        raise SystemExit(exc.return_code or 1) from exc


@nox.session(python=PYTHON)
def bisect(session: nox.Session) -> None:
    """The first upstream commit where each audit finding appears or disappears (no wheels).

    nox -s bisect -- --target T --good REV --bad REV [--project vllm] [--repo PATH]
        [--consumer-target T] [--baseline PIN] [--report-dir DIR]
    nox -s bisect -- --target T --good vllm==0.28.0 --bad vllm==0.29.0   (release sdists)
    """
    _install(session)
    session.run("patchwheel", "bisect", *session.posargs)
