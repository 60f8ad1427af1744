"""The search alone: log2 probes, memoized and shared across findings, ends on a real flip."""

from __future__ import annotations

import math

import pytest

from patchwheel.bisect.search import Search


def flips_at(points: dict[str, tuple[int, bool]]) -> tuple[list[int], object]:
    """A probe where finding k is present from step `points[k][0]` on (or before it, if False)."""
    calls: list[int] = []

    def probe(step: int) -> set[str]:
        calls.append(step)
        return {k for k, (at, appears) in points.items() if (step >= at) == appears}

    return calls, probe


@pytest.mark.parametrize("first", [1, 2, 37, 63, 64])
def test_one_flip_in_log2_probes(first: int) -> None:
    calls, probe = flips_at({"a": (first, True)})
    search = Search(64, probe)  # type: ignore[arg-type]
    (flip,) = search.run(["a"])
    assert flip.first == first
    assert flip.runs <= math.ceil(math.log2(64))
    assert calls[:2] == [0, 64] and len(calls) == len(set(calls)) == flip.runs + 2


def test_findings_share_probes_and_each_finds_its_own_flip() -> None:
    calls, probe = flips_at({"a": (37, True), "b": (5, False), "c": (37, True)})
    flips = {f.key: f for f in Search(64, probe).run(["a", "b", "c"])}  # type: ignore[arg-type]
    assert (flips["a"].first, flips["b"].first, flips["c"].first) == (37, 5, 37)
    assert flips["a"].probes == flips["c"].probes
    assert len(calls) - 2 < sum(f.runs for f in flips.values())
    assert len(calls) == len(set(calls))


def test_a_status_that_goes_back_and_forth_still_ends_on_a_flip() -> None:
    def probe(step: int) -> set[str]:
        return {"a"} if 10 <= step < 20 or step >= 40 else set()

    search = Search(64, probe)
    (flip,) = search.run(["a"])
    assert ("a" in search.status(flip.first)) and ("a" not in search.status(flip.first - 1))


def test_a_key_with_the_same_status_at_both_ends_is_refused() -> None:
    with pytest.raises(ValueError, match="same status"):
        Search(8, lambda step: {"a"}).run(["a"])
