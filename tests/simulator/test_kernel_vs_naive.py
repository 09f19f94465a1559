"""The compiled simulator against the pure-Python reference replay on random small traces."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import POLICIES, Trace, centrality, reference, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

UNLIMITED = 2**62
SEEDS = range(300)
LARGE_SEEDS = range(40)
LARGE_N_OPS = 80
CAPS = (None, 1.5)
# The study's policies run on fewer traces, to keep this file under about 90 s.
STUDY_SEEDS = range(200)
STUDY_LARGE_SEEDS = range(30)
SIMRD_POLICIES = ("dtr", "dtr-eqclass", "dtr-local", "msps", "lru", "largest-storage")
# The study's defaults, written out here and given to both sides (not read from the registry).
PARAMS: dict[str, dict[str, float]] = {
    "nbhd-penalty": {"b": 0.25},
    "two-phase": {"k": 8},
    "tcontrol-inspired": {"alpha": 0.3, "floor": 0.01, "seed": 20260926},
}
FIELDS = (
    "outcome",
    "clock",
    "model_compute",
    "remat_compute",
    "peak_memory",
    "evictions",
    "heuristic_evals",
    "eager_frees",
    "lock_fallbacks",
)


def _budgets(peak: int) -> list[int]:
    fractions = [(0, 1), (1, 4), (1, 3), (1, 2), (2, 3), (3, 4), (9, 10), (1, 1)]
    return sorted({peak * num // den for num, den in fractions})


def _ranks(trace: Trace, policy: str) -> np.ndarray | None:
    if policy != "tcontrol-inspired":
        return None
    return centrality.ranks(centrality.betweenness(trace, int(PARAMS[policy]["seed"])))


def _naive(
    trace: Trace, budget: int, policy: str, cap: float | None, ranks: np.ndarray | None
) -> dict:
    run = reference.simulate_capped(trace, budget, policy, cap, PARAMS.get(policy), ranks=ranks)
    return {f: run[f] for f in (*FIELDS, "eviction_seq_sha256")}


def _fast(trace: Trace, budget: int, policy: str, cap: float | None) -> dict:
    result = simulate(trace, budget, policy, params=PARAMS.get(policy), overhead_cap=cap)
    return {f: getattr(result, f) for f in (*FIELDS, "eviction_seq_sha256")}


def _crosscheck(seed: int, n_ops: int, policy: str) -> None:
    trace = tiny_trace(random_trace_text(seed, n_ops))
    ranks = _ranks(trace, policy)
    # The unconstrained peak does not depend on the policy (see test_naive_smoke).
    peak = reference.simulate(trace, UNLIMITED, "dtr")["peak_memory"]
    for budget in _budgets(peak):
        for cap in CAPS:
            want = _naive(trace, budget, policy, cap, ranks)
            got = _fast(trace, budget, policy, cap)
            label = (
                f"seed {seed}, n_ops {n_ops}, {policy}, budget {budget} (peak {peak}), cap {cap}"
            )
            assert got == want, label


def _seeds(policy: str, simrd_seeds: range, study_seeds: range) -> range:
    return simrd_seeds if policy in SIMRD_POLICIES else study_seeds


@pytest.mark.parametrize("policy", list(POLICIES))
def test_fast_matches_naive_on_random_traces(policy: str) -> None:
    for seed in _seeds(policy, SEEDS, STUDY_SEEDS):
        _crosscheck(seed, 30, policy)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_fast_matches_naive_on_larger_random_traces(policy: str) -> None:
    for seed in _seeds(policy, LARGE_SEEDS, STUDY_LARGE_SEEDS):
        _crosscheck(seed, LARGE_N_OPS, policy)
