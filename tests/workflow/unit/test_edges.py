"""Exact edges by bisection with certified intervals, and ResNet-32's byte-scale islands."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dtrholes.holes.edges import exact_edge, feasible
from simulator import Result, UserError, budget_for, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

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

    def run(budget: int, cap: float | None = None):
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

        def run(budget: int, cap: float | None = None, trace=trace):
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

    def run(budget: int, cap: float | None = None):
        calls.append(budget)
        return simulate(trace, budget, "dtr")

    low, high = run(budget_for(trace, 0.09)), run(budget_for(trace, 0.10))  # oom, ok
    edge = exact_edge(run, low, high, max_runs=2)
    assert len(calls) == 2 + 2 and edge.runs == 2 and not edge.resolved
    full = exact_edge(run, low, high)
    assert full.resolved and edge.below <= full.below < edge.above  # still inside the bracket
    stopped = exact_edge(lambda b, cap: None, low, high)
    assert (stopped.runs, stopped.resolved) == (1, False)  # a timeout stops the search


def test_budgets_with_one_feasibility_are_an_error() -> None:
    trace = tiny_trace(random_trace_text(1))
    ends = [simulate(trace, b, "dtr") for b in (2**40, 2**41)]
    with pytest.raises(UserError, match="differ in feasibility"):
        exact_edge(lambda b, cap: simulate(trace, b, "dtr"), *ends)


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
    exact_edge(lambda budget, cap: probes.append(budget), first, last, split=split)  # None: stop
    assert probes == [probe]


def _blocks(outcomes: list[tuple[str, float]], width: int = 10):
    """A synthetic series: block i covers budgets [i·width, (i+1)·width) and ends with
    outcomes[i] = (outcome, overhead) under the full cap of 60. Under a lower cap, a block that
    completes above it thrashes, and neighbouring blocks that thrash under it replay alike up
    to the stop: the run certifies all of them, as a real replay would."""

    def run(budget: int, cap: float | None) -> Result:
        cap = 60 if cap is None else cap

        def ends(i: int) -> tuple[str, float]:
            outcome, overhead = outcomes[i]
            thrashes = outcome == "thrashed" or outcome == "ok" and overhead > cap
            return ("thrashed", min(cap, overhead)) if thrashes else (outcome, overhead)

        i = first = last = budget // width
        outcome, overhead = ends(i)
        while outcome == "thrashed" and cap < 60 and first > 0 and ends(first - 1)[0] == outcome:
            first -= 1
        while outcome == "thrashed" and cap < 60 and last + 1 < len(outcomes):
            if ends(last + 1)[0] != outcome:
                break
            last += 1
        return replace(
            _RESULT,
            budget=budget,
            outcome=outcome,
            overhead=overhead,
            overhead_cap=cap,
            budget_lo=first * width,
            budget_hi=(last + 1) * width - 1,
        )

    return run


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["ok", "oom", "thrashed"]), st.sampled_from([1.5, 8.0, 30.0])),
        min_size=2,
        max_size=40,
    ),
    st.sampled_from([None, 2.0, 0.2]),
    st.sampled_from([0.5, 0.25]),
    st.booleans(),
)
def test_probing_under_a_lower_cap_finds_an_edge_of_the_full_cap(blocks, factor, split, raise_):
    assume(feasible(blocks[0][0]) != feasible(blocks[-1][0]))
    full = _blocks(blocks)
    calls = []

    def run(budget: int, cap: float | None) -> Result:
        calls.append((budget, cap))
        return full(budget, cap)

    top = len(blocks) * 10 - 1
    edge = exact_edge(
        run, full(0, None), full(top, None), 1000, split, factor, probe_floor=5, probe_raise=raise_
    )
    assert edge.resolved and edge.runs == len(calls)
    assert (edge.outcome_below, edge.outcome_above) == (
        full(edge.below, None).outcome,
        full(edge.above, None).outcome,
    )
    assert feasible(edge.outcome_below) == feasible(blocks[0][0]) != feasible(edge.outcome_above)
    completing = blocks[0] if feasible(blocks[0][0]) else blocks[-1]
    probe_cap = None if factor is None else max(5, factor * completing[1])
    caps = [cap for _, cap in calls]
    if not raise_:
        assert set(caps) <= {None, probe_cap}
        return
    raised = {None if factor is None else max(5, factor * o) for _, o in blocks}
    assert set(caps) <= {None, probe_cap} | {c for c in raised if c is None or c < 60}
    probes = [cap for cap in caps if cap is not None]
    assert probes == sorted(probes)  # a probe cap only rises


def test_an_unsettled_probe_that_completes_under_the_full_cap_moves_the_search_above_it():
    """ok (cheap) | ok at overhead 30, which thrashes under the probe cap | thrashed."""
    run = _blocks([("ok", 1.5), ("ok", 30.0), ("thrashed", 60.0)])
    calls = []

    def logged(budget: int, cap: float | None) -> Result:
        calls.append((budget, cap))
        return run(budget, cap)

    edge = exact_edge(logged, run(0, None), run(29, None), probe_factor=2, probe_floor=10)
    assert (edge.below, edge.above, edge.outcome_below, edge.outcome_above) == (
        19,
        20,
        "ok",
        "thrashed",
    )
    assert calls == [(14, 10), (10, None)]  # the probe at 14 thrashes at 10; its bound reruns


def test_a_raised_probe_cap_ends_the_walk_through_completing_runs_above_it() -> None:
    """ok (cheap) | 20 blocks ok at overhead 30 | thrashed. Under the probe cap (3) the 20
    blocks and the thrashing ones replay alike up to the stop, one certified interval: each
    probe there lands on the failing side, its bound's rerun completes, and the search moves
    up one block per two runs. Raised to the full cap after the first rerun, it bisects."""
    run = _blocks([("ok", 1.5)] + [("ok", 30.0)] * 20 + [("thrashed", 60.0)] * 10)
    found = {}
    for raise_ in (False, True):
        calls = []

        def logged(budget: int, cap: float | None, calls=calls) -> Result:
            calls.append(cap)
            return run(budget, cap)

        first, last = run(0, None), run(309, None)
        edge = exact_edge(logged, first, last, None, 0.25, 2, 2, probe_raise=raise_)
        assert (edge.below, edge.above) == (209, 210)
        assert (edge.outcome_below, edge.outcome_above) == ("ok", "thrashed")
        found[raise_] = (edge.runs, calls)
    assert found[False][0] == 42
    runs, caps = found[True]
    assert caps[:2] == [3.0, None] and set(caps[2:]) == {None} and runs <= 15


def test_a_run_thrashing_under_the_probe_cap_only_counts_once_settled() -> None:
    """An unresolved search reports the innermost settled runs, never an unsettled one."""
    run = _blocks([("ok", 1.5), ("thrashed", 60.0), ("thrashed", 60.0)])
    edge = exact_edge(run, run(0, None), run(29, None), max_runs=1, probe_factor=2, probe_floor=10)
    assert (edge.below, edge.above, edge.outcome_above, edge.runs) == (9, 20, "thrashed", 1)


def test_probes_near_a_cheap_sample_leave_one_full_run_that_thrashes() -> None:
    """ok at overhead 1.5 below 30 thrashing blocks: bisection thrashes at the full cap on
    every probe, probing under twice the completing overhead only on the edge's bound."""
    run = _blocks([("ok", 1.5)] + [("thrashed", 60.0)] * 30)
    full_thrashes = {}
    for factor in (None, 2.0):
        calls = []

        def logged(budget: int, cap: float | None, calls=calls) -> Result:
            calls.append(result := run(budget, cap))
            return result

        edge = exact_edge(logged, run(0, None), run(309, None), probe_factor=factor)
        assert (edge.below, edge.above) == (9, 10)
        full_thrashes[factor] = sum(r.outcome == "thrashed" and r.overhead_cap == 60 for r in calls)
    assert full_thrashes == {None: 4, 2.0: 1}
