"""README's targets table says how many patches each committed series holds: checked, not typed."""

from __future__ import annotations

import re

from patchwheel.config.targets import list_target_names
from patchwheel.patching.patches import series_names
from tests import support

README = support.REPO_ROOT / "README.md"
ROW = re.compile(
    r"^\| `(?P<target>[^`]+)`(?: \(default\))? \|[^|]*\|[^|]*\| (?P<count>\d+) patch"
    r"(?P<rest>[^|]*)\|",
    re.M,
)
VLLM = re.compile(r"vLLM: (\d+) patch")


def test_the_targets_table_counts_every_committed_series() -> None:
    patches = support.REPO_ROOT / "patches"
    rows = {m["target"]: m for m in ROW.finditer(README.read_text("utf-8"))}
    assert set(rows) == set(list_target_names(patches)), "README's table lists every target"
    for name, row in rows.items():
        series = series_names(patches / name / "speculators")
        count = int(row["count"])
        assert count == len(series), f"README: {name} has {count} patches, the series {len(series)}"
        # A vLLM series is counted where the target has one; a row that says none has none.
        vllm = series_names(patches / name / "vllm")
        said = VLLM.search(row["rest"])
        assert (int(said.group(1)) if said else 0) == len(vllm), f"README: {name}'s vLLM series"
