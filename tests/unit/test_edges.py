"""Exact edges by bisection with certified intervals, and ResNet-32's byte-scale islands."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dtrholes.edges import exact_edge
from simulator import UserError, budget_for, simulate
from tests.tracegen import random_trace_text, tiny_trace

# Measured on unmodified simrd (DTR, ResNet-32): it fails at every budget of these byte ranges
# although the budgets just below and above complete.
ISLANDS = [(981_111_552, 981_111_807), (1_069_692_896, 1_069_693_023)]
_RESULT = simulate(tiny_trace(random_trace_text(1)), 2**40)  # fields replaced below


@pytest.mark.parametrize(("first", "last"), ISLANDS)
def test_resnet32_islands_are_exact_certified_intervals(load_named, first, last) -> None:
    trace = load_named("resnet32")
    inside = simulate(trace, first, "dtr")
    assert inside.outcome == "oom" and inside.budget_lo == first
    assert simulate(trace, last, "dtr").outcome == "oom"
    assert simulate(trace, first - 1, "dtr").outcome == "ok"
    assert simulate(trace, last + 1, "dtr").outcome == "ok"


@pytest.mark.parametrize(("first", "last"), ISLANDS)
def test_bisection_finds_both_edges_of_an_island(load_named, first, last) -> None:
    trace = load_named("resnet32")

    def run(budget: int):
        return simulate(trace, budget, "dtr")

    lower = exact_edge(run, run(first - 100), run(first + 50))
    assert (lower.below, lower.outcome_below, lower.outcome_above) == (first - 1, "ok", "oom")
    upper = exact_edge(run, run(last - 50), run(last + 100))
    assert (upper.below, upper.outcome_below, upper.outcome_above) == (last, "oom", "ok")
    assert lower.resolved and upper.resolved
    assert lower.runs < 10 and upper.runs < 10  # certified intervals make the jumps


@pytest.mark.parametrize("split", [0.5, 0.25, 0.1])
def test_edges_on_random_traces_are_adjacent_budgets_that_differ(split: float) -> None:
    found = 0
    for seed in range(40):
        trace = tiny_trace(random_trace_text(seed))

        def run(budget: int, trace=trace):
            return simulate(trace, budget, "dtr")

        peak = run(2**62 - 1).peak_memory
        if run(0).outcome == run(peak).outcome:
            continue
        edge = exact_edge(run, run(0), run(peak), split=split)
        assert edge.resolved
        assert run(edge.below).outcome == edge.outcome_below != "ok"
        assert run(edge.below + 1).outcome == edge.outcome_above == "ok"
        found += 1
    assert found > 20


def test_the_run_cap_leaves_an_unresolved_bracket(load_named) -> None:
    trace = load_named("resnet32")
    calls = []

    def run(budget: int):
        calls.append(budget)
        return simulate(trace, budget, "dtr")

    low, high = run(budget_for(trace, 0.09)), run(budget_for(trace, 0.10))  # oom, ok
    edge = exact_edge(run, low, high, max_runs=2)
    assert len(calls) == 2 + 2 and edge.runs == 2 and not edge.resolved
    full = exact_edge(run, low, high)
    assert full.resolved and edge.below <= full.below < edge.above  # still inside the bracket
    stopped = exact_edge(lambda b: None, low, high)
    assert (stopped.runs, stopped.resolved) == (1, False)  # a timeout stops the search


def test_budgets_with_one_feasibility_are_an_error() -> None:
    trace = tiny_trace(random_trace_text(1))
    ends = [simulate(trace, b, "dtr") for b in (2**40, 2**41)]
    with pytest.raises(UserError, match="differ in feasibility"):
        exact_edge(lambda b: simulate(trace, b, "dtr"), *ends)


@pytest.mark.parametrize(
    ("split", "cheap_below", "probe"),
    [(0.5, True, 550), (0.25, True, 325), (0.25, False, 775), (0.5, False, 550)],
)
def test_probes_cut_the_span_at_the_split_from_the_cheaper_side(split, cheap_below, probe):
    """Certified up to 100 below and from 1,000 above: the first probe of a span of 900."""
    low, high = (1.0, 60.0) if cheap_below else (60.0, 1.0)
    first = replace(_RESULT, outcome="ok", budget=50, budget_lo=0, budget_hi=100, overhead=low)
    last = replace(_RESULT, outcome="thrashed", budget=1000, budget_lo=1000, overhead=high)
    probes = []
    exact_edge(lambda budget: probes.append(budget), first, last, split=split)  # None: stop
    assert probes == [probe]
