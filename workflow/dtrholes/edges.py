"""Exact edges: the pair of adjacent byte budgets where a run's outcome changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator import Result, UserError


@dataclass(frozen=True)
class Edge:
    """Budgets `below` and `below + 1` end in different outcomes."""

    below: int
    outcome_below: str
    outcome_above: str
    runs: int


def exact_edge(run: Callable[[int], Result], low: int, high: int) -> Edge:
    """Bisect on integer bytes between budgets whose outcomes differ, jumping with each run's
    certified interval (every budget in it ends the same way), until two adjacent budgets
    differ. Finds one edge; between `low` and `high` there may be several."""
    first, last = run(low), run(high)
    if not low < high or first.outcome == last.outcome:
        raise UserError(
            f"budgets {low} and {high}",
            "a lower and a higher budget with different outcomes",
            f"{first.outcome} and {last.outcome}",
        )
    runs = 2
    # Invariant: `lo` ends like `low`, `hi` does not.
    lo = _top(first)
    hi = last.budget_lo
    while hi - lo > 1:
        middle = run((lo + hi) // 2)
        runs += 1
        if middle.outcome == first.outcome:
            lo = _top(middle)
        else:
            hi = middle.budget_lo
    return Edge(lo, first.outcome, run(lo + 1).outcome, runs + 1)


def _top(result: Result) -> int:
    """The highest budget certified to end like `result` (an unbounded one cannot be here)."""
    return result.budget_hi if result.budget_hi is not None else result.budget
