"""The hooks a build calls between its steps (implemented by the layers above it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from patchwheel.config.targets import Target


class AuditHook(Protocol):
    """Called once a target's vendor trees hold upstream + series, before any wheel is built.

    ``trees`` maps each project to its vendor tree. It returns the manifest's ``audit`` entry,
    or raises (a PatchwheelError) to stop the build.
    """

    def __call__(self, target: Target, trees: dict[str, Path]) -> dict[str, Any]: ...
