"""Every registered policy's contract, the study policies' reductions to DTR, and hand traces.

Hand traces follow tests/simulator/test_simulate.py: each starts with a pinned constant `w` of 0
bytes that the operators read; the clock starts at 1 and grows by each operator's cost; an
operator stamps its arguments' storages with the clock (last access) and locks them, which moves
them to the end of the pool when it unlocks them; its outputs are stamped with the clock after
it ran. Releasing a storage's last reference frees it at once (it then counts as evicted in the
regions of its neighbours). DTR's score is e* / (size × staleness), e* being the storage's
compute plus its evicted neighbourhood's; DTR's choose scans the pool in order, keeps the last
minimum and stops at a zero.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from pathlib import Path

import pytest

from simulator import (
    POLICIES,
    Options,
    PolicyError,
    Result,
    Trace,
    budget_for,
    centrality,
    peak_memory,
    simulate,
    simulate_events,
)
from simulator.policies import Policy
from simulator.scoring import COVERING, SCAN, UNCENTRAL
from tests.support.tracegen import call as _call
from tests.support.tracegen import constant, random_trace_text, tiny_trace, trace_text
from tests.support.tracegen import release as _release

REFERENCE = Path(__file__).parents[1] / "data" / "simrd_reference.jsonl"
ROWS = [json.loads(line) for line in REFERENCE.read_text().splitlines() if line.strip()]
DTR_ROWS = [r for r in ROWS if r["kind"] == "run" and r["heuristic"] == "DTR"]
OUTCOMES = {"complete": "ok", "oom": "oom"}
CONTRACT_SEEDS = range(30)
INTERVAL_SEEDS = range(60)
DRAWS = 5
# The study's parameters and defaults as the protocol states them.
STUDY_DEFAULTS = {
    "nbhd-penalty": (("b", 0.25),),
    "two-phase": (("k", 8.0),),
    "he-star": (),
    "cost-stale": (),
    "tcontrol-inspired": (("alpha", 0.3), ("floor", 0.01), ("seed", 20260926.0)),
}


def _text(*groups: list[str]) -> str:
    """A trace whose operators hang off one zero-size weight `w`."""
    return trace_text(constant("w", 0), *groups)


# TwoPhase covers the shortfall with one storage. a costs 1 (clock 2), b 20 (clock 22), x 1
# (clock 23). d = f(x) asks for 20 bytes with 60 in use under a budget of 65: the shortfall is
# 15 and the pool [a, b] (x locked). At clock 23:
#       size  e*  staleness  e*/staleness  dtr
#   a   10    1   21         1/21 = .048   1/210 = .0048
#   b   40    20  1          20            20/40 = .5
# DTR evicts a, then, 70 > 65 still, b. TwoPhase skips a, better by e*/staleness but too small
# to cover 15 bytes: only b covers, and one eviction (1 evaluation) suffices.
COVER = _text(
    _call("a", ["w"], 1, 10),
    _call("b", ["w"], 20, 40),
    _call("x", ["w"], 1, 10),
    _call("d", ["x"], 1, 20),
    _release("a", "b", "x", "d"),
)

# No storage covers the shortfall. a costs 1 (clock 2), b 2 (clock 4), c 30 (clock 34), x 1
# (clock 35). d = f(x) asks for 45 with 70 in use under 80: shortfall 35 > the largest storage,
# 30. Pool [a, b, c] at clock 35:
#       size  e*  staleness  e*/staleness  dtr
#   a   10    1   33         .0303         1/330 = .00303
#   b   20    2   31         .0645         2/620 = .00323
#   c   30    30  1          30            1
# k = 1: the largest is c; then the shortfall is 5, covered by a and b: a (1/33 < 2/31).
# k = 2: of c and b, b; then 15 is covered by c only.
# k = 3: all three, a; then 25 is covered by c only.
# DTR evicts a, b, then c (the regions do not change: all three are children of w only).
LARGEST = _text(
    _call("a", ["w"], 1, 10),
    _call("b", ["w"], 2, 20),
    _call("c", ["w"], 30, 30),
    _call("x", ["w"], 1, 10),
    _call("d", ["x"], 1, 45),
    _release("a", "b", "c", "x", "d"),
)

# A storage with an evicted neighbourhood. p1 costs 1 (clock 2), p2 = f(p1) 1 (clock 3), p1 is
# dropped and freed; P = f(p2) costs 1 (clock 4), p2 is dropped and freed, so P's reverse region
# holds p2 and p1: e*(P) = 3, |e*(P)| = 2. Q costs 2 (clock 6), x 2 (clock 8). d = f(x) needs 10
# bytes beyond the budget of 30 with x locked: the pool is [P, Q] at clock 8.
#       size  e*  |e*|  staleness  dtr            nbhd-penalty (b = .25)   he-star  cost-stale
#   P   10    3   2     4          3/40 = .075    .075 × 1.5 = .1125       2        3/4 = .75
#   Q   10    2   0     2          2/20 = .1      .1 × 1 = .1              0        2/2 = 1
# DTR and CostStale evict P; NbhdPenalty and HEStar evict Q, whose evicted neighbourhood is
# smaller; with b = 0 NbhdPenalty is DTR again.
NEIGHBOURHOOD = _text(
    _call("p1", ["w"], 1, 10),
    _call("p2", ["p1"], 1, 10),
    _release("p1"),
    _call("P", ["p2"], 1, 10),
    _release("p2"),
    _call("Q", ["w"], 2, 10),
    _call("x", ["w"], 2, 10),
    _call("d", ["x"], 1, 10),
    _release("P", "Q", "x", "d"),
)

# Size matters to DTR, not to CostStale. L costs 8 (clock 9), S 2 (clock 11), x 1 (clock 12).
# d = f(x) needs 10 beyond the budget of 60 with x locked: the pool is [L, S] at clock 12.
#       size  e*  staleness  dtr              cost-stale  he-star
#   L   40    8   3          8/120 = .067     8/3 = 2.67  0
#   S   10    2   1          2/10 = .2        2/1 = 2     0
# DTR evicts L, CostStale S. HEStar scores both 0 and stops at the first, L (1 evaluation).
SIZE_BLIND = _text(
    _call("L", ["w"], 8, 40),
    _call("S", ["w"], 2, 10),
    _call("x", ["w"], 1, 10),
    _call("d", ["x"], 1, 10),
    _release("L", "S", "x", "d"),
)

# Centrality. Storages w, a, M, b, c, x, d (N = 7) with edges w -> a -> M -> {b, c} and
# w -> x -> d. Betweenness: M lies on a->b, a->c, w->b, w->c (4), a on w->M, w->b, w->c (3),
# x on w->d (1), the others on none: M ranks 0, a 1, x 2, then w, b, c, d by age.
# a costs 5 (clock 6), M = f(a) 1 (clock 7), b = f(M) 5 (clock 12), c = f(M) 5 (clock 17),
# x 1 (clock 18); M, an argument twice, went to the end of the pool. d = f(x) asks for 40 bytes
# with 50 in use: the pool is [a, b, c, M] at clock 18.
#       e*  staleness  dtr
#   a   5   12         5/120 = .042
#   b   5   6          5/60 = .083
#   c   5   1          5/10 = .5
#   M   1   6          1/60 = .017
# Budget 80 (one eviction needed): DTR evicts M. TControlInspired (defaults) locks
# ceil((.3 × 30/80 + .01) × 7) = ceil(.86) = 1 storage, M, and evicts a of [a, b, c]
# (3 evaluations).
# Budget 50 (all four must go): DTR evicts M first, after which a's forward region and b's and
# c's reverse regions hold M (e* 6 each): a 6/120 = .05, b 6/60 = .1, c 6/10 = .6, so a; then b
# (11/60) before c (11/10); then c. TControlInspired locks ceil(K × 7) for K = .3 × residual/50
# + .01 at residuals 0, 10, 20, 30: 1, 1, 1, 2 storages (.07, .49, .91, 1.33), always M: it
# evicts a, b, c, and then finds the pool [M] all locked: the fallback runs DTR on it (1 lock
# fallback) and M goes. Evaluations 3 + 2 + 1 + (0 + 1).
CENTRAL = _text(
    _call("a", ["w"], 5, 10),
    _call("M", ["a"], 1, 10),
    _call("b", ["M"], 5, 10),
    _call("c", ["M"], 5, 10),
    _call("x", ["w"], 1, 10),
    _call("d", ["x"], 1, 40),
    _release("a", "M", "b", "c", "x", "d"),
)


def _replay(result: Result) -> dict:
    """The Result without what depends on the budget itself (see test_interval._replay)."""
    fields = result.to_dict()
    del fields["budget"]
    if fields["failure"] is not None:
        fields["failure"]["over_budget"] += result.budget
    return fields


@functools.cache
def _cases() -> list[tuple[str, str, int]]:
    """(label, trace text, budget): random traces, with and without joins, at a few budgets."""
    cases = []
    for seed in CONTRACT_SEEDS:
        joins = seed % 2 == 1
        text = random_trace_text(seed, 40, joins=joins)
        peak = peak_memory(tiny_trace(text))
        for budget in sorted({0, peak // 4, peak // 2, 3 * peak // 4, peak}):
            cases.append((f"seed {seed}, joins {joins}, budget {budget}", text, budget))
    return cases


def _override(policy: str) -> dict[str, float]:
    """Every parameter doubled (kept in range): a setting that differs from the defaults."""
    given = {}
    for p in POLICIES[policy].params:
        value = p.default * 2 if p.default * 2 <= p.high else (p.low + p.default) / 2
        given[p.name] = int(value) if p.integer else value
    return given


# ---------------------------------------------------------------- the contract of every policy


@pytest.mark.parametrize("policy", list(POLICIES))
def test_same_inputs_give_identical_results(policy: str) -> None:
    for label, text, budget in _cases():
        first = simulate(tiny_trace(text), budget, policy)
        second = simulate(tiny_trace(text), budget, policy)
        assert first == second, label
        assert first.to_dict() == second.to_dict(), label


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("cap", [None, 1.5])
def test_runs_end_within_the_budget(policy: str, cap: float | None) -> None:
    # The kernel raises AssertionError if a victim is not material, unlocked and in the pool:
    # that every call returns is the check that the policy kept to that contract.
    for label, text, budget in _cases():
        result = simulate(tiny_trace(text), budget, policy, overhead_cap=cap)
        assert result.outcome in ("ok", "oom", "thrashed"), label
        assert result.peak_memory <= budget, label
        assert (result.outcome == "ok") == (result.failure is None), label
        assert len(result.first_evictions) == min(result.evictions, 50), label


@pytest.mark.parametrize("policy", list(POLICIES))
def test_certified_interval_replays_the_same(policy: str) -> None:
    for label, text, budget in _cases():
        trace = tiny_trace(text)
        result = simulate(trace, budget, policy)
        lo, hi = result.budget_lo, result.budget_hi
        assert lo <= budget and (hi is None or budget <= hi), label
        assert _replay(simulate(trace, lo, policy)) == _replay(result), f"{label} at {lo}"
        if hi is not None:
            assert _replay(simulate(trace, hi, policy)) == _replay(result), f"{label} at {hi}"


@pytest.mark.parametrize("policy", list(POLICIES))
def test_recording_events_changes_no_decision(policy: str) -> None:
    # Listing every candidate settles regions a scan may leave owed: exact, so no decision moves.
    for label, text, budget in _cases():
        trace = tiny_trace(text)
        plain = simulate(trace, budget, policy)
        for window in (None, (0, trace.n_ops)):
            result, events = simulate_events(trace, budget, policy, candidates=window)
            assert result == plain, label
            decisions = events.of("decision")
            assert [d["storage"] for d in decisions][:50] == list(plain.first_evictions), label
            assert len(events.of("evict")) == plain.evictions, label
            assert len(events.of("free")) == plain.eager_frees, label
            assert len(events.of("fail")) == (plain.failure is not None), label


@pytest.mark.parametrize("policy", list(POLICIES))
def test_retaining_nothing_is_the_plain_replay(policy: str) -> None:
    for label, text, budget in _cases():
        trace = tiny_trace(text)
        assert simulate(trace, budget, policy, retain=[]) == simulate(trace, budget, policy), label


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_retained_storage_is_never_evicted(policy: str) -> None:
    for label, text, budget in _cases():
        trace = tiny_trace(text)
        plain = simulate(trace, budget, policy)
        if not plain.first_evictions:
            continue
        victim = plain.first_evictions[0]
        _, events = simulate_events(trace, budget, policy, retain=[victim])
        assert victim not in {e["storage"] for e in events.of("evict")}, label


@pytest.mark.parametrize("policy", list(POLICIES))
def test_params_are_recorded(policy: str) -> None:
    trace = tiny_trace(random_trace_text(7))
    budget = peak_memory(trace) // 2
    defaults = tuple((p.name, float(p.default)) for p in POLICIES[policy].params)
    assert simulate(trace, budget, policy).params == defaults
    given = _override(policy)
    recorded = simulate(trace, budget, policy, params=given).params
    assert recorded == tuple((name, float(value)) for name, value in given.items())
    assert not given or recorded != defaults


def test_study_policies_are_registered_with_the_protocol_defaults() -> None:
    for name, defaults in STUDY_DEFAULTS.items():
        assert tuple((p.name, p.default) for p in POLICIES[name].params) == defaults, name


def test_an_override_is_recorded() -> None:
    result = simulate(tiny_trace(NEIGHBOURHOOD), 30, "nbhd-penalty", params={"b": 0.5})
    assert result.params == (("b", 0.5),)


def test_every_registered_policy_has_a_kernel_rule() -> None:
    assert {p.rule for p in POLICIES.values()} == {SCAN, COVERING, UNCENTRAL}


@pytest.mark.parametrize("rule", [3, -1, True, 1.0])
def test_an_unknown_rule_is_refused_when_the_policy_is_made(rule: object) -> None:
    # The kernel used to run LargestStorage's rule for any id it did not know.
    with pytest.raises(PolicyError) as info:
        Policy("mine", "a rule the kernel does not have", POLICIES["dtr"].function, rule=rule)
    assert str(info.value) == (f"policy mine: expected a kernel rule among 0, 1, 2, found {rule!r}")
    assert "mine" not in POLICIES


# ---------------------------------------------------------------- reductions to DTR


def _row_id(row: dict) -> str:
    return f"{row['trace']}-{row.get('ratio') or row.get('ratio_of_v2eager_peak')}"


@pytest.mark.parametrize("row", DTR_ROWS, ids=_row_id)
@pytest.mark.parametrize(
    ("policy", "params"),
    [("nbhd-penalty", {"b": 0}), ("tcontrol-inspired", {"alpha": 0, "floor": 0})],
    ids=["nbhd-penalty-b0", "tcontrol-inspired-k0"],
)
def test_reduces_to_dtr_on_the_reference_runs(
    policy: str, params: dict, row: dict, load_named
) -> None:
    result = simulate(load_named(row["trace"]), row["budget"], policy, params=params)
    assert result.outcome == OUTCOMES[row["outcome"]]
    assert result.clock == row["clock"]
    assert result.evictions == row["evictions"]
    assert result.eviction_seq_sha256 == row["eviction_seq_sha256"]
    assert result.heuristic_evals == row["heuristic_eval_count"]
    assert result.lock_fallbacks == 0


# ---------------------------------------------------------------- hand-traced choices


def test_two_phase_evicts_one_storage_that_covers_the_shortfall() -> None:
    dtr = simulate(tiny_trace(COVER), 65, "dtr")
    assert dtr.first_evictions == ("a", "b") and dtr.heuristic_evals == 3
    result = simulate(tiny_trace(COVER), 65, "two-phase")
    assert result.outcome == "ok"
    assert result.first_evictions == ("b",)
    assert result.heuristic_evals == 1
    assert result.clock == dtr.clock == 1 + 1 + 20 + 1 + 1


@pytest.mark.parametrize(
    ("k", "victims", "evals"),
    [
        (1, ("c", "a"), 1 + 2),
        (2, ("b", "c"), 2 + 1),
        (3, ("a", "c"), 3 + 1),
        (8, ("a", "c"), 3 + 1),
    ],
)
def test_two_phase_falls_back_to_the_k_largest(k: int, victims: tuple, evals: int) -> None:
    result = simulate(tiny_trace(LARGEST), 80, "two-phase", params={"k": k})
    assert result.outcome == "ok"
    assert result.first_evictions == victims
    assert result.heuristic_evals == evals
    assert simulate(tiny_trace(LARGEST), 80, "dtr").first_evictions == ("a", "b", "c")


@pytest.mark.parametrize(
    ("policy", "params", "victim", "evals"),
    [
        ("dtr", None, "P", 2),
        ("nbhd-penalty", None, "Q", 2),
        ("nbhd-penalty", {"b": 0}, "P", 2),
        ("he-star", None, "Q", 2),
        ("cost-stale", None, "P", 2),
    ],
)
def test_neighbourhood_size_decides(
    policy: str, params: dict | None, victim: str, evals: int
) -> None:
    result = simulate(tiny_trace(NEIGHBOURHOOD), 30, policy, params=params)
    assert result.outcome == "ok"
    assert result.first_evictions == (victim,)
    assert result.heuristic_evals == evals
    assert result.clock == 1 + 1 + 1 + 1 + 2 + 2 + 1


@pytest.mark.parametrize(
    ("policy", "victim", "evals"),
    [("dtr", "L", 2), ("cost-stale", "S", 2), ("he-star", "L", 1), ("two-phase", "S", 2)],
)
def test_cost_stale_ignores_size(policy: str, victim: str, evals: int) -> None:
    result = simulate(tiny_trace(SIZE_BLIND), 60, policy)
    assert result.outcome == "ok"
    assert result.first_evictions == (victim,)
    assert result.heuristic_evals == evals


def test_central_trace_ranks_m_first() -> None:
    ranks = centrality.ranks(centrality.betweenness(tiny_trace(CENTRAL), 20260926))
    assert ranks.tolist() == [3, 1, 0, 4, 5, 2, 6]  # w, a, M, b, c, x, d


def test_tcontrol_spares_the_most_central_storage() -> None:
    assert simulate(tiny_trace(CENTRAL), 80, "dtr").first_evictions == ("M",)
    result = simulate(tiny_trace(CENTRAL), 80, "tcontrol-inspired")
    assert result.outcome == "ok"
    assert result.first_evictions == ("a",)
    assert result.heuristic_evals == 3
    assert result.lock_fallbacks == 0


def test_tcontrol_falls_back_when_the_whole_pool_is_locked() -> None:
    assert simulate(tiny_trace(CENTRAL), 50, "dtr").first_evictions == ("M", "a", "b", "c")
    result = simulate(tiny_trace(CENTRAL), 50, "tcontrol-inspired")
    assert result.outcome == "ok"
    assert result.first_evictions == ("a", "b", "c", "M")
    assert result.heuristic_evals == 3 + 2 + 1 + 1
    assert result.lock_fallbacks == 1


def test_tcontrol_locking_everything_is_dtr_with_a_fallback_per_decision() -> None:
    # floor = 1 locks ceil(1 × 7) = 7 storages, all of them: every decision falls back to DTR
    # over the whole pool, so the replay is DTR's (alpha = 0 keeps DTR's certified interval).
    for budget in (50, 60, 80):
        dtr = simulate(tiny_trace(CENTRAL), budget, "dtr")
        locked = simulate(
            tiny_trace(CENTRAL), budget, "tcontrol-inspired", params={"alpha": 0, "floor": 1}
        )
        assert locked.lock_fallbacks == dtr.evictions > 0
        assert dataclasses.replace(locked, policy="dtr", params=(), lock_fallbacks=0) == dtr


# ---------------------------------------------------------------- TwoPhase's certified interval


def _check_two_phase_interval(
    trace: Trace, budget: int, k: int, rng: random.Random, label: str
) -> None:
    two_phase = Options("two-phase", {"k": k})
    result = simulate(trace, budget, two_phase)
    lo, hi = result.budget_lo, result.budget_hi
    label = f"{label}, k {k}, budget {budget}: [{lo}, {hi}]"
    assert lo <= budget and (hi is None or budget <= hi), label
    replay = _replay(result)
    top = 2 * lo + 1000 if hi is None else hi
    for inside in {lo, top, *(rng.randint(lo, top) for _ in range(DRAWS))}:
        assert _replay(simulate(trace, inside, two_phase)) == replay, f"{label} {inside}"
    if lo > 0:
        assert _replay(simulate(trace, lo - 1, two_phase)) != replay, f"{label} lo-1"
    if hi is not None:
        assert _replay(simulate(trace, hi + 1, two_phase)) != replay, f"{label} hi+1"


@pytest.mark.parametrize("k", [1, 2, 8])
def test_two_phase_interval_is_exact_and_tight(k: int) -> None:
    rng = random.Random(f"two-phase-{k}")
    for seed in INTERVAL_SEEDS:
        trace = tiny_trace(random_trace_text(seed, 40, joins=seed % 3 == 0))
        peak = peak_memory(trace)
        for budget in sorted({peak // 5, peak // 3, peak // 2, 2 * peak // 3, 9 * peak // 10}):
            _check_two_phase_interval(trace, budget, k, rng, f"seed {seed}")


def test_two_phase_interval_of_the_hand_trace() -> None:
    # COVER: a, b and x fit one after the other iff budget >= 60; d then does not fit below 80.
    # b (40) covers the shortfall 80 - budget iff budget >= 40, a (10) iff budget >= 70, when
    # TwoPhase evicts a instead (the lower e*/staleness), which is enough: [60, 69].
    result = simulate(tiny_trace(COVER), 65, "two-phase")
    assert (result.budget_lo, result.budget_hi) == (60, 69)
    assert simulate(tiny_trace(COVER), 70, "two-phase").first_evictions == ("a",)


# ---------------------------------------------------------------- study sanity facts


@pytest.mark.parametrize(
    ("ratio", "dtr_outcome"),
    [(0.101, "ok"), (0.102, "oom"), (0.104, "oom"), (0.106, "oom"), (0.107, "ok")],
)
def test_resnet32_hole_and_nbhd_penalty(ratio: float, dtr_outcome: str, load_named) -> None:
    """Regression facts, not tuning: DTR's hole on ResNet-32 and NbhdPenalty's runs across it."""
    trace = load_named("resnet32")
    budget = budget_for(trace, ratio)
    assert simulate(trace, budget, "dtr").outcome == dtr_outcome
    assert simulate(trace, budget, "nbhd-penalty").outcome == "ok"


def test_candidates_that_free_nothing_are_still_evicted() -> None:
    # z and y take 0 bytes: DTR-like scores are inf, CostStale's too (staleness 0 for y), and
    # every policy must still pick a pool storage (the kernel checks it) until the pool is
    # empty and d, 10 bytes under a budget of 5, runs out of memory. TControlInspired locks
    # ceil((.3 × 5/5 + .01) × 4) = 2 storages of w, z, y, d (all of centrality 0, so ranked by
    # age: w, z): it evicts y, then falls back to DTR for z.
    text = _text(_call("z", ["w"], 1, 0), _call("y", ["w"], 0, 0), _call("d", ["w"], 1, 10))
    for policy in POLICIES:
        result = simulate(tiny_trace(text), 5, policy)
        assert result.outcome == "oom" and result.evictions == 2, policy
    result = simulate(tiny_trace(text), 5, "tcontrol-inspired")
    assert result.first_evictions == ("y", "z") and result.lock_fallbacks == 1
