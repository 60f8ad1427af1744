"""What every verb reads from the command line: the workspace, the cache, the targets.

The global options (``--root``, ``--cache``) and a verb's ``--target`` / ``--all`` become the
library's objects here, once, so no verb computes a path or a default target by hand.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from patchwheel.config.targets import chosen_target, list_target_names
from patchwheel.errors import ConfigError
from patchwheel.upstream.cache import Cache
from patchwheel.wheelhouse.join import parse_size
from patchwheel.workspace import Workspace, check_name, check_target_name

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
TARGET_HELP = "target name (default: the default target)"


def workspace(args: argparse.Namespace) -> Workspace:
    """The checkout the command works on (``--root``)."""
    return Workspace.at(Path(args.root).resolve())


def cache(args: argparse.Namespace) -> Cache:
    """The cache the command uses (``--cache``, else ``$PATCHWHEEL_CACHE`` or the default)."""
    return Cache(Path(args.cache).resolve() if args.cache else None)


# The options whose values become path components, and what each names. check_names refuses
# a value against the name rule before a verb runs (exit status 2), so no verb reads or writes
# through one; the library's path helpers refuse an unchecked name as well.
NAME_OPTIONS = {
    "target": ("--target", check_target_name),
    "new_target": ("--new-target", check_target_name),
    "consumer_target": ("--consumer-target", check_target_name),
    "project": ("--project", check_name),
    "against": ("--against", check_target_name),
}


def check_names(args: argparse.Namespace) -> None:
    """Refuse any name option that breaks the name rule (InvalidNameError, exit status 2): the
    options of :data:`NAME_OPTIONS` and the variant of each ``--missing VARIANT=POLICY`` (or
    ``PROJECT:VARIANT=POLICY``)."""
    for dest, (option, check) in NAME_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is not None:
            check(value, option)
    for text in getattr(args, "missing", None) or []:
        for part in str(text).partition("=")[0].strip().split(":", 1):
            check_name(part, "--missing: variant")


def target_name(args: argparse.Namespace) -> str:
    """The one target a command applies to: ``--target``, else the default target."""
    return chosen_target(workspace(args).patches, args.target)


def target_names(args: argparse.Namespace) -> list[str]:
    """The targets a command applies to: ``--all``, else :func:`target_name`."""
    if getattr(args, "all", False):
        return list_target_names(workspace(args).patches)
    return [target_name(args)]


def size(text: str) -> int:
    """A size option (``60MiB``) in bytes; a bad one is a ConfigError naming ``--split``."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise ConfigError(f"--split: {exc}") from exc
