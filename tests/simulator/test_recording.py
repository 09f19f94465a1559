"""Recording: a recorded run whose decisions' candidates are replayed from saved states,
equal to the candidates of a replay from the start."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from simulator import POLICIES, Options, Recording, Result, peak_memory, simulate, simulate_events
from simulator.api import _Setup
from tests.support.tracegen import random_trace_text, tiny_trace

SEEDS = range(12)
TOP = 3


def _listed(events, block: tuple[int, int], omit: tuple[int, int] | None = None) -> np.ndarray:
    """The candidate, ranking and decision rows of the decisions in `block` but not in `omit`,
    steps aside."""
    rows = events.rows[events.where("candidate", "ranking", "decision")]
    decision = rows[:, 2]  # the decision number: the second value of these kinds
    picked = (block[0] <= decision) & (decision <= block[1])
    if omit is not None:
        picked &= (decision < omit[0]) | (omit[1] < decision)
    return rows[picked][:, :-1]


@pytest.mark.parametrize("policy", list(POLICIES))
def test_candidates_from_saved_states_equal_a_replay_from_the_start(policy, monkeypatch):
    """Listings of a block of decisions, some with an omitted stretch inside (past which the
    replay may skip ahead to a later saved state), equal a replay's from the start."""
    monkeypatch.setattr(Recording, "SEGMENT", 1)  # a chance to save after every command
    rng = random.Random(20261202)
    resumed = skipped = 0
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, 40, joins=seed % 2 == 1))
        budget, cap = peak_memory(trace) // 4, (None, 1.5)[seed % 2]
        recorded = Recording(trace, budget, policy, overhead_cap=cap, keep=3, spacing=1)
        result, events = simulate_events(trace, budget, policy, overhead_cap=cap)
        assert recorded.result == result
        assert np.array_equal(recorded.events.rows, events.rows)
        n = result.evictions
        if n == 0:
            continue
        steps = recorded.events.values(recorded.events.where("decision"), "step")
        for k in range(6):
            first = rng.randrange(n)
            block = (first, rng.randrange(first, n))
            omit = None
            if k % 2 and block[1] - block[0] >= 2:
                start = rng.randrange(block[0] + 1, block[1])
                omit = (start, rng.randrange(start, block[1]))
            window = (int(steps[rng.randrange(first + 1)]), int(steps[-1]))
            _, full = simulate_events(
                trace, budget, policy, overhead_cap=cap, candidates=window, top=TOP
            )
            listed = recorded.candidates(window, block, TOP, omit)
            expected = _listed(full, block, omit)
            assert np.array_equal(_listed(listed, block, omit), expected), f"seed {seed}"
            assert recorded.candidates(window, block, TOP, omit) is listed  # not replayed again
            if omit is not None:  # no candidates of an omitted decision
                ranked = listed.rows[listed.where("candidate", "ranking"), 2]
                assert not ((omit[0] <= ranked) & (ranked <= omit[1])).any()
            resumed += any(saved.decisions <= first for saved in recorded.saved)
            skipped += omit is not None and any(
                omit[0] < saved.decisions <= omit[1] + 1 for saved in recorded.saved
            )
    assert resumed > 0, "no listing resumed from a saved state: that path went untested"
    assert skipped > 0, "no listing skipped an omitted stretch: that path went untested"


def test_saved_states_stay_bounded_and_spread_out(load_named) -> None:
    """Whatever the run's length, at most `keep` states are held, spaced in decisions."""
    trace = load_named("resnet32")
    budget = int(peak_memory(trace) * 0.104)
    recorded = Recording(trace, budget, keep=4, spacing=1)
    decisions = [saved.decisions for saved in recorded.saved]
    assert 2 <= len(decisions) <= 4
    assert decisions == sorted(set(decisions))
    assert decisions[-1] <= recorded.result.evictions
    assert _Setup.of(trace, Options("dtr")).commands > decisions[-1] > 0


def _apart_from_the_prefix(r: Result) -> Result:
    """A Result without the fields a retention continued from a saved state counts as the
    recorded run did (`Recording.retained`)."""
    return dataclasses.replace(r, heuristic_evals=0, budget_lo=0, budget_hi=0)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_retention_continued_from_a_saved_state_is_the_replay_retaining_it(policy, monkeypatch):
    """Retaining each storage the run evicts: the continuation equals the replay from the
    start; for TwoPhase (k = 2, its k-largest phase frequent) also where the storage was passed
    over among the k largest before its first eviction, which is where the continuation must
    start earlier."""
    monkeypatch.setattr(Recording, "SEGMENT", 1)
    params = {"k": 2} if policy == "two-phase" else None
    resumed = passed_first = 0
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, 40, joins=seed % 2 == 1))
        budget, cap = peak_memory(trace) // 4, (None, 1.5)[seed % 2]
        recorded = Recording(trace, budget, Options(policy, params, cap), keep=64, spacing=1)
        evicted = recorded.events.values(recorded.events.where("evict"), "storage").astype(int)
        for s in dict.fromkeys(evicted.tolist()):
            name = recorded.events.storage_names[s]
            replayed = simulate(trace, budget, Options(policy, params, cap, retain=(name,)))
            assert _apart_from_the_prefix(recorded.retained(name)) == _apart_from_the_prefix(
                replayed
            ), f"seed {seed}, retaining {name}"
            alike = recorded._alike[s]
            resumed += any(0 < saved.decisions <= alike for saved in recorded.saved)
            passed_first += alike < np.flatnonzero(evicted == s)[0]
    assert resumed > 0, "no retention continued from a saved state: that path went untested"
    assert passed_first > 0 or policy != "two-phase", "TwoPhase's k-largest guard went untested"
