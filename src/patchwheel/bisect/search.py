"""The search: for each finding that differs between the ends, the first step where it flips.

Steps are numbered 0 (good) … n (bad). One probe of step i tells the status of every finding
at once (the set of findings present there), so probes are memoized and shared: each finding's
interval is narrowed by every step probed so far, whichever finding it was probed for. For a
finding absent at good and present at bad (or the reverse), its interval is (lo, hi] with hi
the earliest probed step where its status is bad's and lo the probed step just before hi; the
next probe is the middle of the widest open interval. Where the status goes back and forth,
the search still ends on a real flip (step hi differs from step hi - 1), the earliest one the
probes saw.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass
class Flip(Generic[K]):
    """Where one finding's status changes: step `first` differs from step `first - 1`."""

    key: K
    at_good: bool  # present at good (then it disappears), else it appears
    first: int = -1
    probes: list[int] = field(default_factory=list)  # steps that narrowed its interval

    @property
    def runs(self) -> int:
        """Audit runs this finding's search used (shared ones included; the ends excluded)."""
        return len(self.probes)


class Search(Generic[K]):
    """Bisect every key over steps 0 … `last` with one probe function and one memo."""

    def __init__(self, last: int, probe: Callable[[int], Iterable[K]]) -> None:
        if last < 1:
            raise ValueError("a search needs two different ends")
        self.last = last
        self._probe = probe
        self.known: dict[int, frozenset[K]] = {}
        self.order: list[int] = []  # steps in the order they were probed

    def status(self, step: int) -> frozenset[K]:
        """The findings present at `step` (probed once, then remembered)."""
        if step not in self.known:
            self.known[step] = frozenset(self._probe(step))
            self.order.append(step)
        return self.known[step]

    def ends(self) -> tuple[frozenset[K], frozenset[K]]:
        """Probe good and bad: the findings at each end."""
        return self.status(0), self.status(self.last)

    def interval(self, flip: Flip[K]) -> tuple[int, int]:
        """(lo, hi): the flip lies in (lo, hi] by what is known now."""
        hi = min(s for s, found in self.known.items() if (flip.key in found) != flip.at_good)
        lo = max(s for s in self.known if s < hi)
        return lo, hi

    def run(self, keys: Iterable[K]) -> list[Flip[K]]:
        """Find the flip of every key (each present at exactly one end)."""
        good, bad = self.ends()
        flips = [Flip(key, key in good) for key in keys]
        for flip in flips:
            if (flip.key in good) == (flip.key in bad):
                raise ValueError(f"{flip.key!r} has the same status at both ends")
        while True:
            open_ = [(self.interval(f), f) for f in flips]
            open_ = [(span, f) for span, f in open_ if span[1] - span[0] > 1]
            if not open_:
                break
            (lo, hi), _ = max(open_, key=lambda item: item[0][1] - item[0][0])
            step = (lo + hi) // 2
            for (a, b), f in open_:
                if a < step < b:
                    f.probes.append(step)
            self.status(step)
        for flip in flips:
            flip.first = self.interval(flip)[1]
        return flips
