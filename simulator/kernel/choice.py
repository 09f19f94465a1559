"""The policy's choice of a victim: the scan, or TwoPhase's and TControlInspired's rules."""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit
from numba.extending import overload

from simulator import scoring
from simulator.kernel.candidates import owes, scan, score, settle_scored
from simulator.kernel.state import (
    CLOCK,
    EVALS,
    FALLBACKS,
    HI,
    LO,
    LOCKED,
    MEM,
    N_EVICTED,
    NEXT,
    PASSED,
    POOL_HEAD,
)
from simulator.layout import S_ROOT, S_SIZE
from simulator.scoring import COVERING, SCAN, UNCENTRAL


@njit
def choose(setting, scores, request, g, sv, stor, flat, bits, scratch, uf) -> int:
    """The storage the policy evicts, by its rule: the scan, or a kernel-level rule."""
    g[LOCKED] = 0
    return _by_policy(
        scores,
        setting.policy,
        setting.params,
        setting.ranks,
        request,
        setting.budget,
        g,
        sv,
        stor,
        flat,
        bits,
        scratch,
        uf,
    )


def _by_policy(scores, policy, params, rank, request, budget, g, sv, stor, flat, bits, scratch, uf):
    """The choice of the policy with id `policy` in the set `scores` (see _dispatch)."""


@overload(_by_policy)
def _by_policy_typed(
    scores, policy, params, rank, request, budget, g, sv, stor, flat, bits, scratch, uf
):
    return _dispatch(scoring.load(scores.path).RULES)


_ARGUMENTS = "scores, policy, params, rank, request, budget, g, sv, stor, flat, bits, scratch, uf"
_CALLS = {
    SCAN: "scan({i}, params, rank, scores, 0, request, budget, g, sv, stor, flat, bits, scratch, "
    "uf)[0]",
    COVERING: "_choose_covering({i}, params, rank, scores, request, budget, g, sv, stor, flat, "
    "bits, scratch)",
    UNCENTRAL: "_choose_uncentral({i}, params, rank, scores, request, budget, g, sv, stor, "
    "flat, bits, scratch, uf)",
}


@functools.cache
def _dispatch(rules: tuple[int, ...]):
    """`_by_policy` for a set whose policy i chooses by rules[i]: one branch per policy, calling
    its rule with the id a constant, so that each scan inlines its own policy's score and
    flags (see scoring.score) and no call site inlines every policy's."""
    lines = [f"def by_policy({_ARGUMENTS}):"]
    for i, rule in enumerate(rules):
        lines += [f"    {'if' if i == 0 else 'elif'} policy == {i}:"]
        lines += [f"        return {_CALLS[rule].format(i=i)}"]
    lines += ["    raise ValueError('unknown policy id')"]
    namespace = {"scan": scan, "_choose_covering": _choose_covering}
    namespace["_choose_uncentral"] = _choose_uncentral
    exec("\n".join(lines), namespace)
    return namespace["by_policy"]


@njit(inline="always")
def _locked_count(alpha, floor, n, mem, budget) -> int:
    """⌈K·N⌉ for K = alpha · residual / budget + floor, in simrd's float arithmetic."""
    residual = max(budget - mem, 0)
    share = alpha * residual / budget if budget > 0 else 0.0
    return math.ceil((share + floor) * n)


@njit
def _choose_uncentral(
    policy, params, rank, scores, request, budget, g, sv, stor, flat, bits, scratch, uf
):
    """TControlInspired: the policy's scan among storages outside the ⌈K·N⌉ most central,
    where K = alpha · residual / budget + floor (its first two parameters); the whole pool
    when all of it is locked."""
    alpha, floor = params[0], params[1]
    n_locked = _locked_count(alpha, floor, len(rank), g[MEM], budget)
    g[LOCKED] = n_locked
    best, low, high = scan(
        policy,
        params,
        rank,
        scores,
        n_locked,
        request,
        budget,
        g,
        sv,
        stor,
        flat,
        bits,
        scratch,
        uf,
    )
    if alpha != 0:
        _certify_locked(alpha, floor, len(rank), budget, low, high, g)
    if best < 0:
        g[FALLBACKS] += 1
        g[LOCKED] = 0
        best = scan(
            policy, params, rank, scores, 0, request, budget, g, sv, stor, flat, bits, scratch, uf
        )[0]
    return best


@njit
def _certify_locked(alpha, floor, n, budget, low, high, g) -> None:
    """Narrow the certified interval to the budgets whose locked count lies in [low, high]: they
    lock the same storages of the scan, so they make the same decision (a fallback included).

    The count is monotone in the budget wherever residual / budget rounds monotonically: with
    r = budget - memory, unit roundoff u = 2**-53 and budget <= HI, rounded
    alpha·(r+1)/(budget+1) >= rounded alpha·r/budget whenever memory >= u·(2·r·HI + HI + r),
    which holds with a factor of two to spare when (2·(HI - memory) + 2)·HI <= memory·2**52.
    So the budgets with a count in range form an interval found by bisection. Where the bound
    fails (never at real trace sizes) the run certifies its own budget only.
    """
    mem, lo, hi = g[MEM], g[LO], g[HI]
    if hi > mem and (2.0 * (hi - mem) + 2.0) * hi > mem * 2.0**52:
        g[LO], g[HI] = max(lo, budget), min(hi, budget)
        return
    if not low <= _locked_count(alpha, floor, n, mem, lo) <= high:
        g[LO] = _last_alike(alpha, floor, n, mem, budget, lo, low, high)
    if not low <= _locked_count(alpha, floor, n, mem, hi) <= high:
        g[HI] = _last_alike(alpha, floor, n, mem, budget, hi, low, high)


@njit
def _last_alike(alpha, floor, n, mem, inside, outside, low, high) -> int:
    """The budget nearest `outside` whose locked count, like that of `inside`, is in range."""
    while abs(outside - inside) > 1:
        middle = (inside + outside) // 2
        if low <= _locked_count(alpha, floor, n, mem, middle) <= high:
            inside = middle
        else:
            outside = middle
    return inside


@njit(inline="always")
def _before(a_cost, a_size, a_root, b_cost, b_size, b_root) -> bool:
    """TwoPhase's order: lower e*/staleness, then larger size, then older root tensor."""
    if a_cost != b_cost:
        return a_cost < b_cost
    if a_size != b_size:
        return a_size > b_size
    return a_root < b_root


@njit
def _choose_covering(
    policy, params, rank, scores, request, budget, g, sv, stor, flat, bits, stack
) -> int:
    """TwoPhase: among storages big enough to cover the shortfall (else the k largest), the
    lowest e*/staleness. Whether a storage covers the shortfall is a threshold on the budget
    (size >= memory + request - budget); each one narrows the certified interval. Storages
    ranked below 0 are retained: never candidates."""
    need = max(g[MEM] + request - budget, 1)
    clock = g[CLOCK]
    forward, reverse = scoring.flags(scores, policy)[1:3]
    best, best_cost = -1, math.inf
    s = g[POOL_HEAD]
    while s >= 0:
        if rank[s] < 0:
            s = sv[NEXT, s]
            continue
        threshold = g[MEM] + request - stor[S_SIZE, s]
        if stor[S_SIZE, s] >= need:
            g[LO] = max(g[LO], threshold)
            g[EVALS] += 1
            if owes(s, g, sv):
                settle_scored(forward, reverse, s, g, sv, stor, flat, bits, stack)
            cost = score(policy, scores, s, clock, 0, params, rank, sv, stor, g, budget, request)
            if best < 0 or _before(
                cost,
                stor[S_SIZE, s],
                stor[S_ROOT, s],
                best_cost,
                stor[S_SIZE, best],
                stor[S_ROOT, best],
            ):
                best, best_cost = s, cost
        else:
            g[HI] = min(g[HI], threshold - 1)
        s = sv[NEXT, s]
    if best >= 0:
        return best
    return _lowest_of_largest(
        policy, params, rank, scores, request, budget, g, sv, stor, flat, bits, stack
    )


@njit
def _lowest_of_largest(
    policy, params, rank, scores, request, budget, g, sv, stor, flat, bits, stack
) -> int:
    """The lowest e*/staleness among the k largest pool storages (size, then root id)."""
    largest = np.full(max(min(int(params[0]), sv.shape[1]), 1), -1, np.int64)
    s = g[POOL_HEAD]
    while s >= 0:
        # Insert s into the sorted top-k, larger (then older) first; retained ones never.
        i = len(largest) - 1
        if rank[s] >= 0 and (largest[i] < 0 or _bigger(s, largest[i], stor)):
            while i > 0 and (largest[i - 1] < 0 or _bigger(s, largest[i - 1], stor)):
                largest[i] = largest[i - 1]
                i -= 1
            largest[i] = s
        s = sv[NEXT, s]
    best, best_cost = -1, math.inf
    forward, reverse = scoring.flags(scores, policy)[1:3]
    for i in range(len(largest)):
        c = largest[i]
        if c < 0:
            break
        g[EVALS] += 1
        if owes(c, g, sv):
            settle_scored(forward, reverse, c, g, sv, stor, flat, bits, stack)
        cost = score(policy, scores, c, g[CLOCK], 0, params, rank, sv, stor, g, budget, request)
        if best < 0 or _before(
            cost,
            stor[S_SIZE, c],
            stor[S_ROOT, c],
            best_cost,
            stor[S_SIZE, best],
            stor[S_ROOT, best],
        ):
            best, best_cost = c, cost
    for c in largest:  # without one of these, another could take its place (Recording.retained)
        if c >= 0 and c != best and not sv[PASSED, c]:
            sv[PASSED, c] = g[N_EVICTED] + 1
    return best


@njit(inline="always")
def _bigger(a: int, b: int, stor: np.ndarray) -> bool:
    if stor[S_SIZE, a] != stor[S_SIZE, b]:
        return stor[S_SIZE, a] > stor[S_SIZE, b]
    return stor[S_ROOT, a] < stor[S_ROOT, b]
