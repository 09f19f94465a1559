"""Feasibility holes: one vocabulary for sampled series (`holes`) and exact maps (`maps`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hole:
    """Failing budgets above the first success, with the completing budgets that bound them.

    Sampled (`exact` False): `first`..`last` are the lowest and highest failing sample of a
    maximal run of failing samples, `ok_below` and `ok_above` the completing samples just
    outside it, `failing` the failing samples in it; budgets between samples are unknown.
    Exact (`exact` True, from a map): every budget of `first`..`last` fails and completing
    budgets bound it on both sides. A map's failing stretch that an uncovered stretch (or the
    end of the range) bounds is a hole too, not exact, its unknown side's bound None.
    """

    first: int
    last: int
    ok_below: int | None
    ok_above: int | None
    failing: int  # failing samples in a sampled hole; failing budgets (its width) in a map's
    exact: bool = False

    @property
    def width(self) -> int:
        return self.last - self.first + 1

    def encloses(self, other: Hole) -> bool:
        """Whether `other` lies strictly between this hole's completing bounds."""
        below = self.ok_below if self.ok_below is not None else self.first - 1
        above = self.ok_above if self.ok_above is not None else self.last + 1
        return below < other.first and other.last < above

    def bracket(self) -> dict:
        """A sampled hole as the holes table and the repeats state it (its edge brackets)."""
        return {
            "ok_below": self.ok_below,
            "first_fail": self.first,
            "last_fail": self.last,
            "ok_above": self.ok_above,
            "failing": self.failing,
        }


@dataclass(frozen=True, kw_only=True)
class Summary:
    """What one trace × policy series shows: its first success and the holes above it."""

    first_success: int | None
    holes: tuple[Hole, ...]

    @property
    def monotone(self) -> bool:
        """No failing budget above the first success (where outcomes are known)."""
        return not self.holes


@dataclass(frozen=True, kw_only=True)
class SampledSummary(Summary):
    """A sampled series, as the study's Table 1 counts it (counts in samples)."""

    samples: int
    failing_above: tuple[int, ...]  # failing budgets above the first success
    oom_above: int
    thrashed_above: int
    stable_from: int | None  # lowest budget from which every higher resolved sample completes
    unresolved: int  # samples the guard stopped (timeouts)


@dataclass(frozen=True, kw_only=True)
class ExactSummary(Summary):
    """A map (counts in bytes)."""

    runs: int
    covered: int  # bytes with a known outcome
    uncovered: int
