"""Cross-check: the compiled simulator against the naive reference replay on random small traces."""

from __future__ import annotations

import hashlib

import pytest

from simulator import Trace, simulate
from tests.naive import SCORES, naive_simulate
from tests.tracegen import random_trace_text, tiny_trace

UNLIMITED = 2**62
SEEDS = range(300)
LARGE_SEEDS = range(40)
LARGE_N_OPS = 80
CAPS = (None, 1.5)
FIELDS = (
    "outcome",
    "clock",
    "model_compute",
    "remat_compute",
    "peak_memory",
    "evictions",
    "heuristic_evals",
    "eager_frees",
)


def _budgets(peak: int) -> list[int]:
    fractions = [(0, 1), (1, 4), (1, 3), (1, 2), (2, 3), (3, 4), (9, 10), (1, 1)]
    return sorted({peak * num // den for num, den in fractions})


def _naive(trace: Trace, budget: int, policy: str, cap: float | None) -> dict:
    limit = float("inf") if cap is None else trace.model_compute * (cap - 1)
    run = naive_simulate(trace, budget, policy, remat_limit=limit)
    digest = hashlib.sha256("\n".join(run["evicted"]).encode()).hexdigest()
    return {**{f: run[f] for f in FIELDS}, "eviction_seq_sha256": digest}


def _fast(trace: Trace, budget: int, policy: str, cap: float | None) -> dict:
    result = simulate(trace, budget, policy, overhead_cap=cap)
    return {f: getattr(result, f) for f in (*FIELDS, "eviction_seq_sha256")}


def _crosscheck(seed: int, n_ops: int, policy: str) -> None:
    trace = tiny_trace(random_trace_text(seed, n_ops))
    # The unconstrained peak does not depend on the policy (see test_naive_smoke).
    peak = naive_simulate(trace, UNLIMITED, "dtr")["peak_memory"]
    for budget in _budgets(peak):
        for cap in CAPS:
            want = _naive(trace, budget, policy, cap)
            got = _fast(trace, budget, policy, cap)
            label = (
                f"seed {seed}, n_ops {n_ops}, {policy}, budget {budget} (peak {peak}), cap {cap}"
            )
            assert got == want, label


@pytest.mark.parametrize("policy", list(SCORES))
def test_fast_matches_naive_on_random_traces(policy: str) -> None:
    for seed in SEEDS:
        _crosscheck(seed, 30, policy)


@pytest.mark.parametrize("policy", list(SCORES))
def test_fast_matches_naive_on_larger_random_traces(policy: str) -> None:
    for seed in LARGE_SEEDS:
        _crosscheck(seed, LARGE_N_OPS, policy)
