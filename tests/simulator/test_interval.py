"""The certified budget interval: every budget in [budget_lo, budget_hi] replays identically."""

from __future__ import annotations

import random

import pytest

from simulator import POLICIES, Result, Trace, budget_for, peak_memory, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

UNLIMITED = 2**62 - 1
SEEDS = range(100)
CAPS = (None, 1.5)
RESNET_RATIOS = (0.09, 0.101, 0.104, 0.15, 0.5)
DRAWS = 5


def _budgets(peak: int) -> list[int]:
    return sorted({0, peak // 4, peak // 3, peak // 2, 3 * peak // 4, 9 * peak // 10, peak})


def _replay(result: Result) -> dict:
    """The Result without its budget, and with what over_budget measures free of the budget.

    `Failure.over_budget` is bytes in use + request - budget by definition, so it moves with the
    budget across an interval; bytes in use + request is the part the execution decides.
    """
    fields = result.to_dict()
    del fields["budget"]
    if fields["failure"] is not None:
        fields["failure"]["over_budget"] += result.budget
    return fields


def _check_interval(trace: Trace, budget: int, policy: str, cap: float | None, label: str) -> None:
    result = simulate(trace, budget, policy, overhead_cap=cap)
    lo, hi = result.budget_lo, result.budget_hi
    label = f"{label}, {policy}, budget {budget}, cap {cap}: [{lo}, {hi}]"
    assert lo <= budget and (hi is None or budget <= hi), label
    replay = _replay(result)
    assert _replay(simulate(trace, lo, policy, overhead_cap=cap)) == replay, f"{label} at lo"
    if lo > 0:
        below = simulate(trace, lo - 1, policy, overhead_cap=cap)
        assert _replay(below) != replay, f"{label}: lo - 1 replays the same"
    if hi is not None:
        assert _replay(simulate(trace, hi, policy, overhead_cap=cap)) == replay, f"{label} at hi"
        above = simulate(trace, hi + 1, policy, overhead_cap=cap)
        assert _replay(above) != replay, f"{label}: hi + 1 replays the same"


def _check_draws(trace: Trace, budget: int, policy: str, rng: random.Random, label: str) -> None:
    result = simulate(trace, budget, policy)
    lo = result.budget_lo
    hi = 2 * lo + 1000 if result.budget_hi is None else result.budget_hi
    for drawn in (rng.randint(lo, hi) for _ in range(DRAWS)):
        again = simulate(trace, drawn, policy)
        where = f"{label}, {policy}, budget {budget}, drawn {drawn} in [{lo}, {result.budget_hi}]"
        assert again.outcome == result.outcome, where
        assert again.clock == result.clock, where
        assert again.eviction_seq_sha256 == result.eviction_seq_sha256, where
        assert _replay(again) == _replay(result), where


@pytest.fixture(scope="module")
def resnet32(load_named) -> Trace:
    return load_named("resnet32")


@pytest.mark.parametrize("policy", list(POLICIES))
def test_interval_is_exact_and_tight_on_random_traces(policy: str) -> None:
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed))
        for budget in _budgets(peak_memory(trace)):
            for cap in CAPS:
                _check_interval(trace, budget, policy, cap, f"seed {seed}")


@pytest.mark.parametrize("policy", list(POLICIES))
def test_random_budgets_inside_the_interval_replay_the_same(policy: str) -> None:
    rng = random.Random(20240611)
    for seed in SEEDS[:30]:
        trace = tiny_trace(random_trace_text(seed))
        for budget in [*_budgets(peak_memory(trace)), UNLIMITED]:
            _check_draws(trace, budget, policy, rng, f"seed {seed}")


@pytest.mark.parametrize("policy", list(POLICIES))
def test_unlimited_budget_interval_starts_at_the_peak(policy: str) -> None:
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed))
        result = simulate(trace, UNLIMITED, policy)
        assert result.budget_hi is None, f"seed {seed}"
        assert result.budget_lo == result.peak_memory == peak_memory(trace), f"seed {seed}"
        _check_interval(trace, UNLIMITED, policy, None, f"seed {seed}")


# TControlInspired's locked count moves with the budget; the interval folds it in.
RESNET_POLICIES = ("dtr", "tcontrol-inspired")


@pytest.mark.parametrize("policy", RESNET_POLICIES)
@pytest.mark.parametrize("ratio", RESNET_RATIOS)
def test_resnet32_interval_is_exact_and_tight(resnet32: Trace, ratio: float, policy: str) -> None:
    budget = budget_for(resnet32, ratio)
    _check_interval(resnet32, budget, policy, None, f"resnet32 ratio {ratio}")


@pytest.mark.parametrize("policy", RESNET_POLICIES)
@pytest.mark.parametrize("ratio", RESNET_RATIOS)
def test_resnet32_random_budgets_inside_the_interval(
    resnet32: Trace, ratio: float, policy: str
) -> None:
    rng = random.Random(f"resnet32-{ratio}-{policy}")
    budget = budget_for(resnet32, ratio)
    _check_draws(resnet32, budget, policy, rng, f"resnet32 ratio {ratio}")


def test_tcontrol_inspired_certifies_more_than_its_own_budget(resnet32: Trace) -> None:
    """Every ratio's run makes budget-dependent lock decisions, yet certifies a wide interval."""
    for ratio in RESNET_RATIOS:
        result = simulate(resnet32, budget_for(resnet32, ratio), "tcontrol-inspired")
        assert result.budget_hi - result.budget_lo > 1000, ratio


def test_resnet32_unlimited_budget_interval(resnet32: Trace) -> None:
    result = simulate(resnet32, UNLIMITED, "dtr")
    assert result.budget_hi is None
    assert result.budget_lo == result.peak_memory == peak_memory(resnet32)


def test_resnet32_dtr_hole(resnet32: Trace) -> None:
    """DTR completes at 10.1% of the peak yet runs out of memory at 10.4%: the known hole."""
    fits = simulate(resnet32, budget_for(resnet32, 0.101), "dtr")
    fails = simulate(resnet32, budget_for(resnet32, 0.104), "dtr")
    assert fits.outcome == "ok"
    assert fails.outcome == "oom"
    assert fits.budget_hi is not None and fits.budget_hi < fails.budget_lo
