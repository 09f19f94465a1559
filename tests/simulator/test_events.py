"""The event stream and the retention intervention on hand-traced tiny traces."""

from __future__ import annotations

import pytest

from simulator import UserError, simulate, simulate_events
from tests.simulator.test_simulate import CHAIN, OOM_TEXT, TIE, _trace
from tests.support.tracegen import random_trace_text, tiny_trace


def test_tie_lists_both_candidates_and_the_later_wins() -> None:
    # TIE (see test_simulate): d needs 10 bytes beyond 30 at clock 5; a and b both score 0.1.
    result, events = simulate_events(_trace(TIE), 30, candidates=(0, 10))
    (alloc,) = [e for e in events.of("alloc") if e["shortfall"] > 0]
    assert (alloc["request"], alloc["memory"], alloc["shortfall"]) == (10, 30, 10)
    candidates = events.of("candidate")
    assert [(c["storage"], c["e_star"], c["size"], c["staleness"]) for c in candidates] == [
        ("a", 2, 10, 2),
        ("b", 1, 10, 1),
    ]
    assert [c["score"] for c in candidates] == [0.1, 0.1]
    (decision,) = events.of("decision")
    assert (decision["storage"], decision["score"], decision["shortfall"]) == ("b", 0.1, 10)
    (evict,) = events.of("evict")
    assert (evict["storage"], evict["size"], evict["memory"]) == ("b", 10, 20)
    assert result == simulate(_trace(TIE), 30)


def test_without_a_window_decisions_list_no_candidates() -> None:
    _, events = simulate_events(_trace(TIE), 30)
    assert not events.of("candidate")
    assert len(events.of("decision")) == 1


def test_chain_rematerializes_three_deep_and_rebuilds_innermost_first() -> None:
    # CHAIN (see test_simulate): e = f(c) at step 5 recomputes c (depth 1), b (2), a (3).
    _, events = simulate_events(_trace(CHAIN), 20)
    remats = [(e["storage"], e["depth"], e["step"]) for e in events.of("remat")]
    assert remats == [("c", 1, 5), ("b", 2, 5), ("a", 3, 5)]
    rebuilt = [(e["storage"], e["depth"]) for e in events.of("rebuilt")]
    assert rebuilt == [("a", 3), ("b", 2), ("c", 1)]
    assert [e["storage"] for e in events.of("evict")] == ["c", "d", "a", "b"]
    assert [e["storage"] for e in events.of("free")][:2] == ["a", "b"]


def test_oom_event_names_the_failure() -> None:
    # OOM_TEXT: b = f(a) asks 30 under 40; c goes, then 15 + 30 = 45 > 40 with an empty pool.
    result, events = simulate_events(_trace(OOM_TEXT), 40)
    (fail,) = events.of("fail")
    assert (fail["op"], fail["request"], fail["memory"], fail["pinned"]) == (3, 30, 15, 15)
    assert (fail["over_budget"], fail["outcome"]) == (5, "oom")
    assert fail["over_budget"] == result.failure.over_budget


def test_retaining_the_only_candidate_fails_before_any_eviction() -> None:
    # With c retained the pool offers nothing: b fails at once, 25 + 30 - 40 = 15 over.
    result = simulate(_trace(OOM_TEXT), 40, retain=["c"])
    assert result.outcome == "oom" and result.evictions == 0
    assert result.failure.over_budget == 15


def test_retaining_an_unknown_storage_is_a_user_error() -> None:
    with pytest.raises(UserError, match="retain"):
        simulate(_trace(CHAIN), 20, retain=["nope"])


def test_a_bad_window_is_a_user_error() -> None:
    with pytest.raises(UserError, match="step window"):
        simulate_events(_trace(CHAIN), 20, candidates=(-1, 3))


@pytest.mark.parametrize("seed", range(6))
def test_positions_columns_and_counts_agree_with_the_listed_events(seed) -> None:
    trace = tiny_trace(random_trace_text(seed))
    budget = int(simulate(trace, 10**15).peak_memory * 0.6)
    _, events = simulate_events(trace, budget, candidates=(5, 25))
    names = {"storage": events.storage_names, "tensor": events.tensor_names}
    for kinds in (("decision",), ("evict", "free"), ("remat", "rebuilt"), ("candidate",)):
        listed = events.of(*kinds)
        positions = events.where(*kinds)
        assert [e["seq"] for e in listed] == positions.tolist()
        for column in ("step", "op", "storage"):
            got = [int(v) for v in events.values(positions, column)]
            if column in names:
                got = [names[column][v] for v in got]
            assert got == [e[column] for e in listed]
        assert events.of(*kinds, steps=(10, 20)) == [e for e in listed if 10 <= e["step"] <= 20]
    middle = len(events) // 2
    for kind in ("evict", "remat"):
        before = sum(e["seq"] < middle for e in events.of(kind))
        assert events.count(kind, 0, middle) == before
        assert events.count(kind, middle, len(events)) == len(events.of(kind)) - before


def _in_rank_order(candidates: list[dict]) -> list[tuple]:
    """By score, ties to the later one in pool order."""
    order = sorted(range(len(candidates)), key=lambda i: (candidates[i]["score"], -i))
    return [tuple(candidates[i][k] for k in ("storage", "score", "e_star")) for i in order]


def _ranked_by_hand(chosen: str, listed: list[dict], top: int) -> tuple:
    """From every candidate listed before a decision: how many the scan evaluated (those the
    policy could choose, in pool order up to the first zero score), the chosen storage's rank
    among them (0 if not evaluated), and the best `top`."""
    evaluated = []
    for c in listed:
        if c["eligible"]:
            evaluated.append(c)
            if c["score"] == 0:
                break
    ranked = _in_rank_order(evaluated)
    rank = next((i + 1 for i, c in enumerate(ranked) if c[0] == chosen), 0)
    return len(evaluated), rank, ranked[:top]


@pytest.mark.parametrize("policy", ["dtr", "two-phase", "tcontrol-inspired", "he-star", "lru"])
@pytest.mark.parametrize("seed", range(8))
def test_keeping_the_top_candidates_ranks_as_the_full_listing(policy, seed) -> None:
    trace = tiny_trace(random_trace_text(seed, 60, joins=seed % 2 == 1))
    peak = simulate(trace, 10**15).peak_memory
    for share, top in ((0.5, 0), (0.55, 1), (0.6, 2), (0.75, 5)):
        budget = int(peak * share)
        window = (3, 50)
        full_result, full = simulate_events(trace, budget, policy, candidates=window)
        kept_result, kept = simulate_events(trace, budget, policy, candidates=window, top=top)
        assert kept_result == full_result
        rest = ("alloc", "decision", "evict", "remat", "rebuilt", "free", "fail")
        moved = zip(full.of(*rest), kept.where(*rest).tolist(), strict=True)
        assert kept.of(*rest) == [{**e, "seq": seq} for e, seq in moved]
        expected, listed = [], []
        for e in full.of("candidate", "decision"):
            if e["kind"] == "candidate":
                listed.append(e)
            elif listed:
                expected.append(_ranked_by_hand(e["storage"], listed, top))
                listed = []
        got, best = [], []
        for e in kept.of("candidate", "ranking"):
            if e["kind"] == "candidate":
                best.append(e)
            else:
                got.append((e["evaluated"], e["rank"], _in_rank_order(best)))
                best = []
        assert got == expected
        assert len(got) == len(kept.of("decision", steps=window))


def test_top_must_be_a_whole_number() -> None:
    with pytest.raises(UserError, match="top"):
        simulate_events(_trace(TIE), 30, candidates=(0, 10), top=-1)
