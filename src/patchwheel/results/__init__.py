"""The published results: docs/results/ pages and README's status lines, written only from the
JSON reports committed under reports/ (never typed).

``python -m patchwheel.results`` writes them; ``--check`` (CI) fails when any page differs from
what its JSON gives. :func:`expected` is the one function that says what they hold.
"""

from __future__ import annotations

from patchwheel.results.catalog import Report, find_reports
from patchwheel.results.paths import machine_paths
from patchwheel.results.site import README_END, README_START, check, expected, write

__all__ = [
    "README_END",
    "README_START",
    "Report",
    "check",
    "expected",
    "find_reports",
    "machine_paths",
    "write",
]
