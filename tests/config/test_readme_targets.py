"""README's targets table says how many patches each committed series holds: checked, not typed."""

from __future__ import annotations

import re

from patchwheel.config.targets import list_target_names
from patchwheel.patching.patches import series_names
from tests import support

README = support.REPO_ROOT / "README.md"
ROW = re.compile(
    r"^\| `(?P<target>[^`]+)`(?: \(default\))? \|[^|]*\|[^|]*\| (?P<count>\d+) patch", re.M
)


def test_the_targets_table_counts_every_committed_series() -> None:
    patches = support.REPO_ROOT / "patches"
    rows = {m["target"]: int(m["count"]) for m in ROW.finditer(README.read_text("utf-8"))}
    assert set(rows) == set(list_target_names(patches)), "README's table lists every target"
    for name, count in rows.items():
        series = series_names(patches / name / "speculators")
        assert count == len(series), f"README: {name} has {count} patches, the series {len(series)}"
