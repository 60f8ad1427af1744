"""Sub-commands of the layers above the pipeline (audit, verify, rebase, publish …).

cli.py asks this module which sub-commands exist, so the core CLI never imports those layers
at start-up and a layer can be added by appending its registrar here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchwheel.upstream.cache import Cache

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

REGISTRARS: list[Registrar] = []


def build_audit_hook(allow_findings: bool, cache: Cache) -> Any:
    """The API audit ``build`` runs on each target once its vendor trees are ready."""
    from patchwheel.audit.target import build_hook

    return build_hook(allow_findings, cache=cache)


def _audit_trees(args: argparse.Namespace) -> Mapping[str, Path]:
    """The patched vendor trees of ``--target`` (default target), by project name."""
    from patchwheel import cli
    from patchwheel.building import run

    name = cli.target_names(args)[0]
    return run.vendor_trees(name, cli.paths_of(args), cli.cache_of(args))


def _register_audit(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``audit`` (owned by audit/cli.py)."""
    from patchwheel.cli.audit import add_audit_parser

    add_audit_parser(subparsers, target_trees=_audit_trees)


REGISTRARS.append(_register_audit)


def _register_publish(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """``publish`` and ``serve`` (owned by publish_cli.py)."""
    from patchwheel.cli import publish

    publish.register(subparsers)


REGISTRARS.append(_register_publish)


def _register_wheelhouse(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``wheelhouse`` (offline wheel folders), ``split`` and ``join``."""
    from patchwheel.cli.wheelhouse import register

    register(sub)


REGISTRARS.append(_register_wheelhouse)


def _register_rebase(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """``rebase`` and ``export`` (owned by rebase/cli.py)."""
    from patchwheel.cli import rebase as rebase_cli

    rebase_cli.register(subparsers)


REGISTRARS.append(_register_rebase)


def _register_verify(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``verify`` (owned by verify/cli.py)."""
    from patchwheel.cli.verify import register

    register(subparsers)


REGISTRARS.append(_register_verify)
