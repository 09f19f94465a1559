"""Exact edges: the pair of adjacent byte budgets where a run's feasibility changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator import Result, UserError
from simulator.result import OK


@dataclass(frozen=True)
class Edge:
    """Budgets up to `below` end like the lower sample, `above` and the next ones do not.

    Resolved when `above == below + 1`; otherwise the run cap (or a timeout) stopped the search
    and the edge lies somewhere in (below, above].
    """

    below: int
    above: int
    outcome_below: str
    outcome_above: str
    runs: int

    @property
    def resolved(self) -> bool:
        return self.above == self.below + 1


def feasible(outcome: str) -> bool:
    return outcome == OK


def exact_edge(
    run: Callable[[int], Result | None],
    first: Result,
    last: Result,
    max_runs: int | None = None,
    split: float = 0.5,
) -> Edge:
    """Bisect on integer bytes between two runs that differ in feasibility, jumping with each
    run's certified interval (every budget in it ends the same way), until two adjacent budgets
    differ. `run` may return None (a timeout), which stops the search. Finds one edge; between
    the two budgets there may be several.

    Each probe cuts the open span at `split` of its width from the side whose run had the
    lower overhead (0.5: halves). A probe near a thrashing run mostly thrashes too, at up to
    the overhead cap's cost, and one near a cheap run is mostly cheap."""
    if not first.budget < last.budget or feasible(first.outcome) == feasible(last.outcome):
        raise UserError(
            f"budgets {first.budget} and {last.budget}",
            "a lower and a higher budget that differ in feasibility",
            f"{first.outcome} and {last.outcome}",
        )
    # Invariant: `below` is certified up to `lo` and `above` from `hi`, feasible as `first`
    # and as `last` respectively.
    below, above, runs = first, last, 0
    lo, hi = _top(first), last.budget_lo
    while hi - lo > 1 and (max_runs is None or runs < max_runs):
        share = split if below.overhead <= above.overhead else 1 - split
        middle = run(lo + min(max(int((hi - lo) * share), 1), hi - lo - 1))
        runs += 1
        if middle is None:
            break
        if feasible(middle.outcome) == feasible(first.outcome):
            lo, below = _top(middle), middle
        else:
            hi, above = middle.budget_lo, middle
    return Edge(lo, hi, below.outcome, above.outcome, runs)


def _top(result: Result) -> int:
    """The highest budget certified to end like `result` (an unbounded one cannot be here)."""
    return result.budget_hi if result.budget_hi is not None else result.budget
