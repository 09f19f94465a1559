"""Replayer: replays at budget after budget that resume from saved state, equal to `simulate`."""

from __future__ import annotations

import random

import pytest

from simulator import POLICIES, Replayer, Trace, UserError, budget_for, peak_memory, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

SEEDS = range(40)
CAPS = (None, 1.5)
TILES = 40


def _tile_up(replayer: Replayer, trace: Trace, policy: str, cap, budget: int, label: str) -> int:
    """Tile upward from `budget` as a map does; every result must be simulate's. Returns how
    many runs resumed from a saved state."""
    resumed = 0
    for _ in range(TILES):
        result = replayer.simulate(budget)
        assert result == simulate(trace, budget, policy, overhead_cap=cap), f"{label} at {budget}"
        resumed += replayer.resumed_at > 0
        if result.budget_hi is None:
            break
        budget = result.budget_hi + 1
    return resumed


@pytest.mark.parametrize("policy", list(POLICIES))
def test_tiling_upward_equals_simulate_on_random_traces(policy: str) -> None:
    resumed = 0
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, 40, joins=seed % 2 == 1))
        for cap in CAPS:
            replayer = Replayer(trace, policy, overhead_cap=cap, saves=8)
            label = f"seed {seed}, {policy}, cap {cap}"
            resumed += _tile_up(replayer, trace, policy, cap, peak_memory(trace) // 4, label)
    assert resumed > 0, "no run resumed: the saved-state path went untested"


@pytest.mark.parametrize("policy", list(POLICIES))
def test_budgets_in_any_order_equal_simulate(policy: str) -> None:
    """A saved state is used only for budgets inside its own certified interval."""
    rng = random.Random(20261130)
    for seed in SEEDS[:20]:
        trace = tiny_trace(random_trace_text(seed, 40))
        replayer, peak = Replayer(trace, policy, saves=8), peak_memory(trace)
        for budget in (rng.randint(0, peak) for _ in range(15)):
            assert replayer.simulate(budget) == simulate(trace, budget, policy), f"seed {seed}"


def test_resnet32_edge_tiles_resume(load_named) -> None:
    """Tiles above DTR's last success below the known hole: identical, and nearly all resume."""
    trace = load_named("resnet32")
    resumed = _tile_up(Replayer(trace), trace, "dtr", None, budget_for(trace, 0.101), "resnet32")
    assert resumed >= TILES - 2


def test_a_bad_budget_is_a_user_error() -> None:
    replayer = Replayer(tiny_trace(random_trace_text(1)))
    with pytest.raises(UserError, match="budget"):
        replayer.simulate(-1)
