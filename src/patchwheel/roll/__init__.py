"""Roll a target onto its channel's newer revision: discover, rebase, build, audit, bisect,
verify, report (``nox -s roll``). See :mod:`patchwheel.roll.run`."""

from __future__ import annotations

from patchwheel.roll.outcome import RollOutcome
from patchwheel.roll.run import abort, resume, skip, start

__all__ = ["RollOutcome", "abort", "resume", "skip", "start"]
