"""Bisect: the first upstream commit where an audit finding appears or disappears.

The target's patched consumer is audited against the provider's sources commit by commit
(first-parent chain, log2 steps, one reused sparse checkout, the audit cache kept warm), or
against release sdists when no history reaches. Entry point:
:func:`patchwheel.bisect.run.bisect_target`; the report is :class:`BisectReport`.
"""

from __future__ import annotations

from patchwheel.bisect.report import BisectReport
from patchwheel.bisect.run import bisect_target

__all__ = ["BisectReport", "bisect_target"]
