"""A candidate's score, its lower bound, and simrd's scan of the pool."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from simulator import scoring
from simulator.kernel.classes import class_compute
from simulator.kernel.regions import settle
from simulator.kernel.state import (
    CLOCK,
    EVALS,
    FWD_C,
    FWD_COUNT,
    FWD_DUE,
    HI,
    LO,
    N_DUE,
    NEXT,
    NO_LIMIT,
    POOL_HEAD,
    REV_C,
    REV_COUNT,
    REV_DUE,
)


@njit(inline="always")
def score(policy, scores, s, clock, class_value, params, rank, sv, stor, g, budget, request):
    """The score policy id `policy` of the set `scores` gives storage s (`class_value`: the
    e* over equivalence classes, when the policy reads it; see scoring.FEATURES)."""
    return scoring.score(
        scores,
        policy,
        s,
        clock,
        class_value,
        params,
        rank,
        sv,
        stor,
        g,
        sv[FWD_C, s],
        sv[REV_C, s],
        nbhd(s, sv),
        budget,
        request,
    )


@njit(inline="always")
def bound(policy, scores, s, clock, params, rank, sv, stor, g, budget, request) -> float:
    """s's score with its owed regions counted as empty: a lower bound of it for a monotone
    policy, exact when s owes nothing (correctly rounded division is monotonic)."""
    fwd, rev = (1 - sv[FWD_DUE, s], 1 - sv[REV_DUE, s])
    count = fwd * sv[FWD_COUNT, s] + rev * sv[REV_COUNT, s]
    return scoring.score(
        scores,
        policy,
        s,
        clock,
        0,
        params,
        rank,
        sv,
        stor,
        g,
        fwd * sv[FWD_C, s],
        rev * sv[REV_C, s],
        count,
        budget,
        request,
    )


@njit(inline="always")
def nbhd(s: int, sv: np.ndarray) -> int:
    return sv[FWD_COUNT, s] + sv[REV_COUNT, s]


@njit(inline="always")
def owes(s: int, g: np.ndarray, sv: np.ndarray) -> bool:
    # The count first: it stays in cache, and policies without regions never owe.
    return g[N_DUE] != 0 and (sv[FWD_DUE, s] != 0 or sv[REV_DUE, s] != 0)


@njit
def settle_scored(forward, reverse, s, g, sv, stor, flat, bits, stack) -> None:
    """Settle the regions a policy reads in s's score (MSPS reads the reverse one only).

    Called only for a storage that owes (`owes`): a call in a scan's loop, even one not
    taken, made scans of every policy several times slower.
    """
    if forward:
        settle(s, True, g, sv, stor, flat, bits, stack)
    if reverse:
        settle(s, False, g, sv, stor, flat, bits, stack)


@njit(inline="always")
def _outscored(
    policy, scores, params, rank, s, best, budget, request, g, sv, stor, flat, bits, stack
):
    """Whether s's score exceeds `best` whatever its owed regions hold (`bound`); else
    settle them. An outscored s is neither the minimum nor zero: its regions can stay owed."""
    if bound(policy, scores, s, g[CLOCK], params, rank, sv, stor, g, budget, request) > best:
        return True
    settle(s, True, g, sv, stor, flat, bits, stack)
    settle(s, False, g, sv, stor, flat, bits, stack)
    return False


@njit(inline="always")
def scan(
    policy, params, rank, scores, n_locked, request, budget, g, sv, stor, flat, bits, scratch, uf
):
    """simrd's Heuristic.choose: scan the pool in order, keep the last minimum, stop at a zero.

    Storages ranked below `n_locked` are not candidates. Returns the choice (-1 if nothing else
    is in the pool) and the range of locked counts that lock the same storages in this scan:
    above the highest rank it skipped, up to the lowest rank it evaluated. A monotone policy
    skips settling a candidate whose lower bound (`bound`) already exceeds the best score (it
    is neither the minimum nor zero, its regions can stay owed); the others settle every owed
    candidate. A policy reading the budget certifies this budget only: no rule says which
    other budgets decide alike.
    """
    _, forward, reverse, eqclass, monotone, reads_budget = scoring.flags(scores, policy)
    if reads_budget:
        g[LO], g[HI] = max(g[LO], budget), min(g[HI], budget)
    best, best_s = math.inf, -1
    top_locked, low_free = -1, NO_LIMIT
    s = g[POOL_HEAD]
    clock = g[CLOCK]
    while s >= 0:
        r = rank[s]
        if r < n_locked:
            top_locked = max(top_locked, r)
            s = sv[NEXT, s]
            continue
        low_free = min(low_free, r)
        g[EVALS] += 1
        if owes(s, g, sv):
            if not monotone:
                settle_scored(forward, reverse, s, g, sv, stor, flat, bits, scratch)
            elif _outscored(
                policy,
                scores,
                params,
                rank,
                s,
                best,
                budget,
                request,
                g,
                sv,
                stor,
                flat,
                bits,
                scratch,
            ):
                s = sv[NEXT, s]
                continue
        class_value = 0
        if eqclass:
            class_value = class_compute(s, sv, stor, flat, scratch, uf[0], uf[1])
        cost = score(
            policy, scores, s, clock, class_value, params, rank, sv, stor, g, budget, request
        )
        if cost <= best:
            best, best_s = cost, s
        if cost == 0:
            break
        s = sv[NEXT, s]
    return best_s, top_locked + 1, low_free
