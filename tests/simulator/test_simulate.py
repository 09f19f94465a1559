"""Hand-traced replays with exact expected outcomes, and the contract of `simulate` and friends.

Every tiny trace below starts with a constant `w` that the operators read; a constant is pinned,
so it is never a candidate. Each comment derives the expectation from simrd's rules: the clock
starts at 1 and grows by each operator's cost; an operator first stamps its arguments' storages
with the clock (their `last_access_int`) and locks them, and its outputs are stamped with the
clock after it ran; a storage's DTR score is (compute + evicted neighbourhood compute) /
(size × staleness); the pool is scanned in insertion order keeping the last minimum and stopping
at a zero.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from simulator import (
    POLICIES,
    PolicyError,
    Result,
    UserError,
    budget_for,
    get_policy,
    peak_memory,
    simulate,
)
from simulator.trace import Trace
from tests.support.tracegen import call as _call
from tests.support.tracegen import constant as _constant
from tests.support.tracegen import random_trace_text, tiny_trace
from tests.support.tracegen import release as _release
from tests.support.tracegen import trace_text as _text

UNLIMITED = 2**62 - 1  # the largest budget simulate accepts
SIMRD_NAMES = {
    "DTR": "dtr",
    "DTREqClass": "dtr-eqclass",
    "DTRLocal": "dtr-local",
    "MSPS": "msps",
    "LRU": "lru",
    "LargestStorage": "largest-storage",
}


# (a) a tie. Clock 1; a costs 2 (clock 3), b 1 (clock 4), x 1 (clock 5). d = f(x) needs 10
# bytes more than the 30 in use, with x locked: the pool is [a, b]. At clock 5, a scores
# 2 / (10 × (5 - 3)) = 0.1 and b 1 / (10 × (5 - 4)) = 0.1, the same float: b, later, wins.
TIE = _text(
    _constant("w", 0),
    _call("a", ["w"], 2, 10),
    _call("b", ["w"], 1, 10),
    _call("x", ["w"], 1, 10),
    _call("d", ["x"], 1, 10),
    _release("a", "b", "x", "d"),
)

# (a') a tie between two outputs of one operator. They enter the pool siblings first, then the
# output the operator was materialized for (simrd's `siblings + [t]`): the pool is [b, a, ...].
# At clock 4 both score 2 / (10 × (4 - 3)) = 0.2 and a, later in the pool, is evicted.
SIBLING_TIE = _text(
    _constant("w", 0),
    _call(["a", "b"], ["w"], 2, 10),
    _call("x", ["w"], 1, 10),
    _call("d", ["x"], 1, 10),
    _release("a", "b", "x", "d"),
)

# (b) a zero score. n costs 1 (clock 2), then z, y and v cost nothing (clock stays 2), x costs 1
# (clock 3). d needs 10 bytes beyond the budget of 50; the pool is [n, z, y, v]. At clock 3,
# n scores 1 / (10 × 1) = 0.1 and z 0 / (10 × 1) = 0: the scan stops at z after 2 evaluations.
# Without the stop the last minimum would be v. LRU scores every one 2 (their last access), so
# it evaluates all 4 and keeps the last, v.
ZERO = _text(
    _constant("w", 0),
    _call("n", ["w"], 1, 10),
    _call("z", ["w"], 0, 10),
    _call("y", ["w"], 0, 10),
    _call("v", ["w"], 0, 10),
    _call("x", ["w"], 1, 10),
    _call("d", ["x"], 1, 10),
    _release("n", "z", "y", "v", "x", "d"),
)


def _eager_text(release_early: bool) -> str:
    """a -> b -> c of 10 bytes each under a budget of 20, dropping `a` before c runs or at the end.

    Dropped early, a's storage (no reference left, not locked) is freed at once: c finds 10
    bytes in use and fits without any eviction. Kept, a is the only candidate (b is c's locked
    argument) and is evicted.
    """
    early, late = (["a"], []) if release_early else ([], ["a"])
    return _text(
        _constant("w", 0),
        _call("a", ["w"], 1, 10),
        _call("b", ["a"], 1, 10),
        _release(*early),
        _call("c", ["b"], 1, 10),
        _release(*late, "b", "c"),
    )


# (d) OOM. w is a pinned constant of 5 bytes; c and a take 10 each (25 in use). b = f(a) asks
# for 30 under a budget of 40: 55 > 40, so the pool's only candidate c goes (a is locked), then
# 15 + 30 = 45 > 40 with an empty pool. Operators: w 0, c 1, a 2, b 3.
OOM_TEXT = _text(
    _constant("w", 5),
    _call("c", ["w"], 1, 10),
    _call("a", ["w"], 1, 10),
    _call("b", ["a"], 1, 30),
    _release("a", "b", "c"),
)

# (e) a chain needing nested rematerializations, budget 20. Operators w 0, a 1, b 2, c 3, d 4,
# e 5 cost 0, 1, 3, 4, 8, 16: model compute 32.
# a (clock 2), b (clock 5), a dropped and freed, c (clock 9), b dropped and freed; d needs 20
# with c's 10 in use: c is evicted (1), d runs (clock 17). e = f(c): c is gone, so c is
# recomputed (depth 1), which needs b (depth 2), which needs a (depth 3). a needs 10 with d's 20
# in use: d is evicted (2), a runs (clock 18, remat 1). b fits (clock 21, remat 4). c needs 10
# with a and b in use, b locked: a is evicted (3), c runs (clock 25, remat 8). e needs 10 with b
# and c in use, c locked: b is evicted (4), e runs (clock 41). Each choice had one candidate, so
# every policy agrees. Releases at the end free c and e eagerly (eager frees: a, b, c, e).
CHAIN = _text(
    _constant("w", 0),
    _call("a", ["w"], 1, 10),
    _call("b", ["a"], 3, 10),
    _release("a"),
    _call("c", ["b"], 4, 10),
    _release("b"),
    _call("d", ["w"], 8, 20),
    _call("e", ["c"], 16, 10),
    _release("c", "d", "e"),
)

# (g) one trace, a different victim per policy. o costs 30 (clock 31), p 20 (clock 51), q = f(p)
# 1 (clock 52); p is dropped and freed, so q's reverse region (evicted ancestors) holds p's 20.
# r costs 8 (clock 60), v 2 (clock 62), x 8 (clock 70). d = f(x) needs 10 beyond the budget of
# 90 with x locked: the pool is [o, q, r, v] at clock 70.
#       size  compute  last  staleness  region  dtr-local      dtr             msps         lru
#   o   10    30       31    39         0       30/390 = .077  30/390 = .077   30/10 = 3    31
#   q   10    1        52    18         20      1/180 = .0056  21/180 = .117   21/10 = 2.1  52
#   r   40    8        60    10         0       8/400 = .02    8/400 = .02     8/40 = .2    60
#   v   20    2        62    8          0       2/160 = .0125  2/160 = .0125   2/20 = .1    62
# lru: o (least recent); largest-storage: r (1/40); dtr-local: q; msps: v; dtr: v, not q,
# because recomputing q would mean recomputing p first; dtr-eqclass adds p's class to q: v.
POLICY_PICKS = _text(
    _constant("w", 0),
    _call("o", ["w"], 30, 10),
    _call("p", ["w"], 20, 10),
    _call("q", ["p"], 1, 10),
    _release("p"),
    _call("r", ["w"], 8, 40),
    _call("v", ["w"], 2, 20),
    _call("x", ["w"], 8, 10),
    _call("d", ["x"], 1, 10),
    _release("o", "q", "r", "v", "x", "d"),
)


def _trace(text: str) -> Trace:
    return tiny_trace(text)


# ---------------------------------------------------------------- hand-traced replays


def test_tie_evicts_the_later_storage_in_pool_order() -> None:
    result = simulate(_trace(TIE), 30, "dtr")
    assert result.outcome == "ok"
    assert result.first_evictions == ("b",)
    assert result.heuristic_evals == 2
    assert result.clock == 6
    assert result.eager_frees == 3  # a, x, d; b was already evicted when released
    assert simulate(_trace(TIE), 30, "lru").first_evictions == ("a",)  # last access 3 < 4


@pytest.mark.parametrize("policy", ["dtr", "dtr-local", "lru"])
def test_tie_between_siblings_evicts_the_first_output(policy: str) -> None:
    result = simulate(_trace(SIBLING_TIE), 30, policy)
    assert result.outcome == "ok"
    assert result.first_evictions == ("a",)


def test_zero_score_stops_the_scan() -> None:
    result = simulate(_trace(ZERO), 50, "dtr")
    assert result.first_evictions == ("z",)
    assert result.evictions == 1
    assert result.heuristic_evals == 2
    assert simulate(_trace(ZERO), 50, "dtr-local").first_evictions == ("z",)


def test_without_a_zero_the_whole_pool_is_scanned() -> None:
    result = simulate(_trace(ZERO), 50, "lru")
    assert result.first_evictions == ("v",)
    assert result.heuristic_evals == 4


def test_eager_free_is_not_an_eviction_and_frees_memory() -> None:
    freed = simulate(_trace(_eager_text(release_early=True)), 20, "dtr")
    assert freed.outcome == "ok"
    assert freed.evictions == 0 and freed.heuristic_evals == 0
    assert freed.eager_frees == 3  # a, then b and c at the end
    assert freed.peak_memory == 20
    kept = simulate(_trace(_eager_text(release_early=False)), 20, "dtr")
    assert kept.outcome == "ok"
    assert kept.first_evictions == ("a",) and kept.evictions == 1
    assert kept.eager_frees == 2  # b and c; a was evicted before its release


def test_oom_snapshot() -> None:
    result = simulate(_trace(OOM_TEXT), 40, "dtr")
    assert result.outcome == "oom"
    assert result.first_evictions == ("c",)
    assert result.clock == 3 and result.model_compute == 2
    assert result.peak_memory == 25
    failure = result.failure
    assert failure is not None
    assert failure.op == 3
    assert failure.request == 30
    assert failure.over_budget == 15 + 30 - 40
    assert failure.pinned == 15  # w (pinned, 5) and a (locked, 10)
    assert failure.depth == 0


@pytest.mark.parametrize("policy", sorted(SIMRD_NAMES.values()))
def test_chain_is_rematerialized_at_depth_three(policy: str) -> None:
    result = simulate(_trace(CHAIN), 20, policy)
    assert result.outcome == "ok" and result.failure is None
    assert result.first_evictions == ("c", "d", "a", "b")
    assert result.evictions == 4
    assert result.rematerializations == 3
    assert result.model_compute == 32
    assert result.remat_compute == 1 + 3 + 4
    assert result.clock == 1 + 32 + 8
    assert result.max_depth == 3
    assert result.eager_frees == 4
    assert result.peak_memory == 20
    assert result.overhead == (32 + 8) / 32


def test_without_pressure_nothing_is_recomputed() -> None:
    result = simulate(_trace(CHAIN), 40, "dtr")  # c, d and e fit side by side: 10 + 20 + 10
    assert result.evictions == 0 and result.rematerializations == 0
    assert result.clock == 1 + 32 and result.max_depth == 0


def test_overhead_cap_thrashes_after_the_recomputation_that_exceeds_it() -> None:
    # Cap 1.24 allows 32 × 0.24 = 7.68 of remat compute: after a (1) and b (4), c brings it to 8.
    result = simulate(_trace(CHAIN), 20, "dtr", overhead_cap=1.24)
    assert result.outcome == "thrashed"
    assert result.remat_compute == 8 and result.rematerializations == 3
    assert result.model_compute == 1 + 3 + 4 + 8  # e never ran
    assert result.clock == 25
    assert result.first_evictions == ("c", "d", "a")
    failure = result.failure
    assert failure is not None
    assert (failure.op, failure.request, failure.depth) == (3, 10, 1)
    assert failure.over_budget == 20 - 20  # memory in use minus budget


def test_overhead_cap_is_a_strict_bound() -> None:
    # Cap 1.25 allows exactly 32 × 0.25 = 8.0, and 8 does not exceed it.
    capped = simulate(_trace(CHAIN), 20, "dtr", overhead_cap=1.25)
    free = simulate(_trace(CHAIN), 20, "dtr")
    assert capped.outcome == "ok"
    assert dataclasses.replace(capped, overhead_cap=None) == free


def test_overhead_cap_one_stops_at_the_first_recomputation() -> None:
    result = simulate(_trace(CHAIN), 20, "dtr", overhead_cap=1)
    assert result.outcome == "thrashed"
    assert result.remat_compute == 1 and result.clock == 1 + 16 + 1
    assert result.failure is not None
    assert (result.failure.op, result.failure.depth) == (1, 3)
    assert result.failure.over_budget == 10 - 20  # only a is in memory


@pytest.mark.parametrize(
    ("policy", "victim"),
    [
        ("lru", "o"),
        ("largest-storage", "r"),
        ("dtr-local", "q"),
        ("msps", "v"),
        ("dtr", "v"),
        ("dtr-eqclass", "v"),
    ],
)
def test_each_policy_picks_its_victim(policy: str, victim: str) -> None:
    result = simulate(_trace(POLICY_PICKS), 90, policy)
    assert result.outcome == "ok"
    assert result.first_evictions == (victim,)
    assert result.heuristic_evals == 4
    assert result.clock == 1 + 30 + 20 + 1 + 8 + 2 + 8 + 1


# ---------------------------------------------------------------- the API contract


def test_same_inputs_give_equal_results() -> None:
    trace = _trace(CHAIN)
    first = simulate(trace, 20, "dtr", overhead_cap=3.0)
    second = simulate(_trace(CHAIN), 20, "dtr", overhead_cap=3.0)
    assert first == second
    assert json.dumps(first.to_dict(), sort_keys=True) == json.dumps(
        second.to_dict(), sort_keys=True
    )


def test_result_is_frozen() -> None:
    result = simulate(_trace(CHAIN), 20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.clock = 0  # type: ignore[misc]
    assert result.failure is None
    oom = simulate(_trace(OOM_TEXT), 40)
    with pytest.raises(dataclasses.FrozenInstanceError):
        oom.failure.op = 0  # type: ignore[union-attr, misc]


@pytest.mark.parametrize(("text", "budget"), [(CHAIN, 20), (OOM_TEXT, 40)])
def test_to_dict_is_json_serialisable(text: str, budget: int) -> None:
    result = simulate(_trace(text), budget, "dtr", overhead_cap=2.0)
    back = json.loads(json.dumps(result.to_dict()))
    assert back["clock"] == result.clock
    assert back["first_evictions"] == list(result.first_evictions)
    assert set(back) == {f.name for f in dataclasses.fields(Result)}
    if result.failure is not None:
        assert back["failure"] == dataclasses.asdict(result.failure)


@pytest.mark.parametrize("budget", [-1, 1.5, 20.0, "20", None, UNLIMITED + 1])
def test_bad_budget_is_a_user_error(budget: object) -> None:
    with pytest.raises(UserError):
        simulate(_trace(CHAIN), budget)  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [0.99, 0, -1, math.nan])
def test_overhead_cap_below_one_is_a_user_error(cap: float) -> None:
    with pytest.raises(UserError):
        simulate(_trace(CHAIN), 20, overhead_cap=cap)


def test_unknown_policy_is_a_one_line_policy_error() -> None:
    with pytest.raises(PolicyError) as info:
        simulate(_trace(CHAIN), 20, "belady")
    assert "\n" not in str(info.value) and "belady" in str(info.value)


def test_unknown_parameter_is_a_one_line_policy_error() -> None:
    with pytest.raises(PolicyError) as info:
        simulate(_trace(CHAIN), 20, "dtr", params={"no_such_knob": 1.0})
    assert "\n" not in str(info.value) and "no_such_knob" in str(info.value)


@pytest.mark.parametrize(("simrd_name", "name"), sorted(SIMRD_NAMES.items()))
def test_simrd_class_names_resolve(simrd_name: str, name: str) -> None:
    assert get_policy(simrd_name).name == name
    by_class = simulate(_trace(POLICY_PICKS), 90, simrd_name)
    assert by_class == simulate(_trace(POLICY_PICKS), 90, name)


def test_each_simrd_class_is_registered_once() -> None:
    from_registry = {p.simrd_name: name for name, p in POLICIES.items() if p.simrd_name}
    assert from_registry == SIMRD_NAMES


@pytest.mark.parametrize("ratio", [0, 0.1, 1 / 3, 0.5, 0.7, 0.999, 1, 1.5, 3])
def test_budget_for_is_int_of_peak_times_ratio(ratio: float) -> None:
    trace = _trace(CHAIN)
    assert budget_for(trace, ratio) == int(peak_memory(trace) * ratio)
    assert budget_for(trace, ratio, peak=1234567) == int(1234567 * ratio)


@pytest.mark.parametrize("ratio", [math.nan, math.inf, -math.inf, -0.5, "0.5", None])
def test_budget_for_rejects_bad_ratios(ratio: object) -> None:
    with pytest.raises(UserError):
        budget_for(_trace(CHAIN), ratio)  # type: ignore[arg-type]


def test_peak_memory_of_the_hand_traces() -> None:
    assert peak_memory(_trace(CHAIN)) == 10 + 20 + 10  # c, d and e
    assert peak_memory(_trace(OOM_TEXT)) == 5 + 10 + 10 + 30
    assert peak_memory(_trace(POLICY_PICKS)) == 100


@pytest.mark.parametrize("joins", [False, True])
def test_peak_memory_is_the_unlimited_peak_for_every_policy(joins: bool) -> None:
    for seed in range(40):
        trace = tiny_trace(random_trace_text(seed, joins=joins))
        peaks = {simulate(trace, UNLIMITED, policy).peak_memory for policy in POLICIES}
        assert peaks == {peak_memory(trace)}, f"seed {seed}"


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("joins", [False, True])
def test_memory_never_exceeds_the_budget(policy: str, joins: bool) -> None:
    for seed in range(40):
        trace = tiny_trace(random_trace_text(seed, n_ops=40, joins=joins))
        peak = peak_memory(trace)
        for budget in sorted({0, peak // 4, peak // 3, peak // 2, 3 * peak // 4, peak - 1, peak}):
            if budget < 0:
                continue
            result = simulate(trace, budget, policy)
            assert result.peak_memory <= budget, f"seed {seed}, budget {budget}: {result}"
            assert (result.outcome == "ok") == (result.failure is None)
