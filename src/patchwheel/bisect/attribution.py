"""Which patch of the target's series a finding concerns.

The consumer standing still (a target's vendor tree): the patch whose commit wrote the line
(blame). The consumer moving (its upstream history): its lines are upstream's, so the patch is
the one whose ``Vllm-Change`` header names the finding's symbol — the drift that patch answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from patchwheel.audit.report import Finding
from patchwheel.bisect.probe import Side
from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import load_target
from patchwheel.errors import PatchwheelError
from patchwheel.patching.export import line_origin
from patchwheel.patching.patches import Patch
from patchwheel.patching.series import resolve


def target_series(patches_dir: Path, target: str, project: str) -> list[Patch]:
    """The patches the target applies to the project (its own series or its pool, resolved by
    the gates); none when the target cannot be read."""
    try:
        loaded = load_target(patches_dir, target)
        return list(resolve(loaded.project(project), locked_pins(loaded)).patches)
    except PatchwheelError:
        return []


def patch_of(
    moving: Side, consumer_tree: Path, series: Sequence[Patch]
) -> Callable[[Finding], str | None]:
    """How a finding maps to the target's series: the patch that wrote the consumer's line (the
    consumer stands still: its vendor tree's blame), else the patch whose ``Vllm-Change``
    header names the finding's symbol (the consumer moves: its own lines are upstream's)."""
    if moving == "provider":

        def wrote(finding: Finding) -> str | None:
            try:
                return line_origin(consumer_tree, finding.path, finding.line)
            except (PatchwheelError, OSError, ValueError):
                return None

        return wrote
    changes = [(p.name, _dotted(p.fields.get("Vllm-Change", ""))) for p in series]

    def answers(finding: Finding) -> str | None:
        symbol = finding.symbol
        for name, dotted in changes:
            if dotted and (
                symbol == dotted
                or symbol.startswith(f"{dotted}.")
                or dotted.startswith(f"{symbol}.")
            ):
                return name
        return None

    return answers


def _dotted(change: str) -> str:
    """``vllm/config/scheduler.py::SchedulerConfig (0.16.0)`` → the dotted symbol."""
    where = change.split(" (", 1)[0].strip()
    path, _, qualname = where.partition("::")
    if not path.endswith(".py"):
        return ""
    dotted = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    dotted = f"{dotted}.{qualname}" if qualname else dotted
    return dotted.removesuffix(".__init__")
