"""Rebase a target's patch series onto new pins: 3-way, classified, resumable.

``patchwheel rebase --target T --onto PIN [--onto PIN …] [--new-target NAME]`` (and
``--continue`` / ``--skip`` / ``--abort``). See :mod:`patchwheel.rebase.run` for the flow,
:mod:`patchwheel.rebase.replay` for the classes, :mod:`patchwheel.rebase.onto` for how pins map.
"""

from __future__ import annotations

from patchwheel.rebase.run import Outcome, abort, audit_pairs, resume, skip, start

__all__ = ["Outcome", "abort", "audit_pairs", "resume", "skip", "start"]
