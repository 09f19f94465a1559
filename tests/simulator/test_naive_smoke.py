"""Sanity checks of the pure-Python reference replay the compiled simulator is checked against."""

from __future__ import annotations

import pytest

from simulator import POLICIES, PolicyError, reference
from simulator.trace import Trace
from tests.support.tracegen import call as _call
from tests.support.tracegen import random_trace_text, tiny_trace
from tests.support.tracegen import release as _release

UNLIMITED = 2**62
SEEDS = range(50)


# Four activations of 40 bytes, aged differently, then d = f(a) under a budget of 170: a, b, c, e
# hold 160 bytes and a is locked as d's argument, so one of b, c, e goes. At clock 57, DTR scores
# b 40/(40*6), c 1/(40*5) and e 5/(40*0) = inf, so it evicts c (cheap to recompute); LRU evicts b
# (oldest access); largest-storage ties on size and keeps the last of the pool, e.
HAND_PREFIX = [
    '{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}',
    '{"INSTRUCTION":"CONSTANT","NAME":"w"}',
    '{"INSTRUCTION":"MEMORY","MEMORY":"0","NAME":"w"}',
    *_call("a", ["w"], 10, 40),
    *_call("b", ["w"], 40, 40),
    *_call("c", ["w"], 1, 40),
    *_call("e", ["w"], 5, 40),
    *_call("d", ["a"], 1, 40),
]


def _hand_trace(*extra: str) -> Trace:
    return tiny_trace("\n".join([*HAND_PREFIX, *extra, *_release("a", "b", "c", "e")]) + "\n")


@pytest.mark.parametrize("joins", [False, True])
def test_unlimited_budget_runs_every_operator_once(joins: bool) -> None:
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, joins=joins))
        peaks = set()
        for policy in POLICIES:
            result = reference.simulate(trace, UNLIMITED, policy)
            assert result["outcome"] == "ok"
            assert result["evictions"] == 0 and result["remat_compute"] == 0
            assert result["clock"] == 1 + trace.model_compute
            peaks.add(result["peak_memory"])
        assert len(peaks) == 1, f"seed {seed}: peak memory depends on the policy"


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_zero_budget_runs_out_of_memory(policy: str) -> None:
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed))
        allocates = bool((trace.tensor_size > 0).any())
        outcome = reference.simulate(trace, 0, policy)["outcome"]
        assert outcome == ("oom" if allocates else "ok")


@pytest.mark.parametrize(
    ("policy", "victim"), [("dtr", "c"), ("dtr-local", "c"), ("lru", "b"), ("largest-storage", "e")]
)
def test_hand_traced_eviction(policy: str, victim: str) -> None:
    result = reference.simulate(_hand_trace(), 170, policy)
    assert result["outcome"] == "ok"
    assert result["evicted"] == [victim]
    assert result["clock"] == 58 and result["remat_compute"] == 0
    assert result["eager_frees"] == 3  # of a, b, c, e, the one already evicted frees nothing


def test_recompute_limit_stops_a_thrashing_run() -> None:
    trace = _hand_trace(*_call("z", ["c"], 0, 0))  # needs c back: recomputing it costs 1
    assert reference.simulate(trace, 170, "dtr")["remat_compute"] == 1
    assert reference.simulate(trace, 170, "dtr", remat_limit=1)["outcome"] == "ok"
    assert reference.simulate(trace, 170, "dtr", remat_limit=0)["outcome"] == "thrashed"


def test_an_unknown_policy_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match=r"^--policy: expected one of dtr, .* found 'mine'$"):
        reference.simulate(_hand_trace(), 170, "mine")


def test_parameters_are_resolved_by_the_registry() -> None:
    with pytest.raises(PolicyError, match=r"^policy nbhd-penalty, parameter b: expected"):
        reference.simulate(_hand_trace(), 170, "nbhd-penalty", {"b": -1})
    with pytest.raises(PolicyError, match=r"^policy dtr: expected parameters among: none"):
        reference.simulate(_hand_trace(), 170, "dtr", {"b": 1})
    # simrd's class names name the same policies; omitted parameters take their defaults.
    assert reference.simulate(_hand_trace(), 170, "LRU")["evicted"] == ["b"]
    default = reference.simulate(_hand_trace(), 170, "nbhd-penalty")
    assert default == reference.simulate(_hand_trace(), 170, "nbhd-penalty", {"b": 0.25})
