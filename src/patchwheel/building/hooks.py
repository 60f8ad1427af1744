"""The hooks a build calls between its steps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from patchwheel.config.targets import Target

AuditHook = Callable[[Target, dict[str, Path]], dict[str, Any]]
