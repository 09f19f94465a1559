"""Exact edges: the pair of adjacent byte budgets where a run's feasibility changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from simulator import Result, UserError
from simulator.result import OK, THRASHED


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


class _Held(NamedTuple):
    """A run the search holds on one side of the edge: the budget up to (lower side) or from
    (upper side) which it counts there, and whether it ends as it would under the full cap."""

    result: Result
    bound: int
    settled: bool


def exact_edge(
    run: Callable[[int, float | None], Result | None],
    first: Result,
    last: Result,
    max_runs: int | None = None,
    split: float = 0.5,
    probe_factor: float | None = None,
    probe_floor: float = 1.0,
    probe_raise: bool = False,
) -> Edge:
    """Bisect on integer bytes between two runs that differ in feasibility, jumping with each
    run's certified interval (every budget in it ends the same way), until two adjacent budgets
    differ. `run(budget, cap)` runs a budget under an overhead cap (None: the samples' own) and
    may return None (a timeout), which stops the search. Finds one edge; between the two
    budgets there may be several.

    Each probe cuts the open span at `split` of its width from the side whose run had the
    lower overhead (0.5: halves). A probe near a thrashing run mostly thrashes too, at up to
    the overhead cap's cost, and one near a cheap run is mostly cheap.

    With `probe_factor`, probes run first under a lower cap: the completing sample's overhead
    times the factor, at least `probe_floor`, when that is below the samples' cap. A probe that
    completes or runs out of memory under it ends identically under the full cap; one that
    thrashes is unsettled: it counts as failing while the span narrows, and only an unsettled
    run that ends up bounding the edge is rerun under the full cap at its bounding budget. A
    probe that thrashes costs its cap in overhead, and the probes near a completing sample mostly
    complete with an overhead like its own.

    With `probe_raise`, a rerun that completes shows the probe cap too low where the search
    now is (completing runs near the edge cost more than the completing sample): probes then
    run under that run's overhead times the factor if that is higher (the full cap if it is
    not below it), and the runs held as thrashing under the lower cap are dropped. Without it,
    every later probe there thrashes under the probe cap again and the search walks one
    certified interval per two runs.
    """
    if not first.budget < last.budget or feasible(first.outcome) == feasible(last.outcome):
        raise UserError(
            f"budgets {first.budget} and {last.budget}",
            "a lower and a higher budget that differ in feasibility",
            f"{first.outcome} and {last.outcome}",
        )
    search = _Search(first, last)
    completing = first if feasible(first.outcome) else last
    probe_cap = _probe_cap(completing, first.overhead_cap, probe_factor, probe_floor)
    while max_runs is None or search.runs < max_runs:
        if search.hi - search.lo > 1:
            share = split if search.cheaper_below() else 1 - split
            width = search.hi - search.lo
            probed = run(search.lo + min(max(int(width * share), 1), width - 1), probe_cap)
        elif (unsettled := search.unsettled_bound()) is not None:
            probed = run(unsettled, None)
            if probe_raise and probed is not None and feasible(probed.outcome):
                raised = _probe_cap(probed, first.overhead_cap, probe_factor, probe_floor)
                probe_cap = None if raised is None else max(raised, probe_cap)
                search.drop_unsettled()
        else:
            break
        search.runs += 1
        if probed is None:
            break
        search.hold(probed)
    return search.edge()


def _probe_cap(
    completing: Result, full: float | None, factor: float | None, floor: float
) -> float | None:
    """The cap probes run under first, near a completing run, if it is below the full cap."""
    if factor is None:
        return None
    cap = max(floor, factor * completing.overhead)
    return cap if full is None or cap < full else None


class _Search:
    """The runs held on each side of the edge, innermost last, and the open span between."""

    def __init__(self, first: Result, last: Result):
        self.first, self.runs = first, 0
        self.below = [_Held(first, _top(first), True)]
        self.above = [_Held(last, last.budget_lo, True)]

    @property
    def lo(self) -> int:
        return self.below[-1].bound

    @property
    def hi(self) -> int:
        return self.above[-1].bound

    def cheaper_below(self) -> bool:
        cap = self.first.overhead_cap
        return _cost(self.below[-1], cap) <= _cost(self.above[-1], cap)

    def unsettled_bound(self) -> int | None:
        """The bounding budget of the innermost run if it is unsettled, dropped from its side
        (only the failing side holds unsettled runs)."""
        for side in (self.below, self.above):
            if not side[-1].settled:
                return side.pop().bound
        return None

    def drop_unsettled(self) -> None:
        """Forget the runs held as failing on a lower cap's word."""
        self.below = [held for held in self.below if held.settled]
        self.above = [held for held in self.above if held.settled]

    def hold(self, r: Result) -> None:
        """Put `r` on its side, counting from inside its certified interval and the open span
        (an unsettled run's interval, certified under the probe cap, may reach past the span)."""
        settled = r.outcome != THRASHED or r.overhead_cap == self.first.overhead_cap
        if feasible(r.outcome) == feasible(self.first.outcome):
            self.below.append(_Held(r, min(_top(r), self.hi - 1), settled))
        else:
            self.above.append(_Held(r, max(r.budget_lo, self.lo + 1), settled))

    def edge(self) -> Edge:
        """The innermost settled runs' bounds: an unresolved search leaves the edge between."""
        below = next(held for held in reversed(self.below) if held.settled)
        above = next(held for held in reversed(self.above) if held.settled)
        return Edge(below.bound, above.bound, below.result.outcome, above.result.outcome, self.runs)


def _cost(held: _Held, cap: float | None) -> float:
    """What a run near a held one may cost, in overhead: an unsettled run's is the full cap's
    (under it, completing and running out of memory end identically; thrashing may not)."""
    return held.result.overhead if held.settled or cap is None else cap


def _top(result: Result) -> int:
    """The highest budget certified to end like `result` (an unbounded one cannot be here)."""
    return result.top(unbounded=result.budget)
