"""README's targets table says how many patches each committed target applies (its own series or
its pool, resolved by the gates): checked, not typed."""

from __future__ import annotations

import re

from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import list_target_names, load_target
from patchwheel.patching.series import resolve
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
        target = load_target(patches, name)
        lock = locked_pins(target)
        # the patches the target applies: its own series or its pool's, resolved by the gates
        series = resolve(target.project("speculators"), lock).patches
        count = int(row["count"])
        assert count == len(series), f"README: {name} has {count} patches, the series {len(series)}"
        # A vLLM series is counted where the target has one; a row that says none has none.
        vllm = resolve(target.project("vllm"), lock).patches
        said = VLLM.search(row["rest"])
        assert (int(said.group(1)) if said else 0) == len(vllm), f"README: {name}'s vLLM series"
