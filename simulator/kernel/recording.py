"""The replay's events (off unless g[EV_ON]): decisions, candidates, failures."""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator import scoring
from simulator.kernel.candidates import bound, nbhd, owes, score
from simulator.kernel.classes import class_compute
from simulator.kernel.regions import settle
from simulator.kernel.state import (
    CLOCK,
    COMPUTE,
    EV_CANDIDATE,
    EV_COLS,
    EV_DECISION,
    EV_FAIL,
    EV_FIRST_DECISION,
    EV_FIRST_STEP,
    EV_LAST_DECISION,
    EV_LAST_STEP,
    EV_N,
    EV_OMIT_FIRST,
    EV_OMIT_LAST,
    EV_ON,
    EV_RANKING,
    EV_TOP,
    FAIL_DEPTH,
    FAIL_OP,
    FAIL_OVER,
    FAIL_PINNED,
    FAIL_REQ,
    FWD_C,
    LAST,
    LOCKED,
    MEM,
    N_EVICTED,
    NEXT,
    POOL_HEAD,
    REV_C,
    STEP,
)
from simulator.layout import S_SIZE


@njit
def emit(ev, g, kind, op, a, b, c, d, e, f, x):
    """Append one event row (values exact: every integer here is below 2**53), stamped with
    the step (the operator the schedule is running); returns ev, reallocated when full."""
    n = g[EV_N]
    if n == ev.shape[0]:
        grown = np.zeros((2 * n + 64, EV_COLS))
        grown[:n] = ev[:n]
        ev = grown
    row = ev[n]
    row[0], row[1], row[2], row[3], row[4] = kind, op, a, b, c
    row[5], row[6], row[7], row[8], row[9], row[10] = d, e, f, x, 0, g[STEP]
    g[EV_N] = n + 1
    return ev


@njit
def note_fail(ev, g, status):
    if not g[EV_ON]:
        return ev
    return emit(
        ev,
        g,
        EV_FAIL,
        g[FAIL_OP],
        g[FAIL_REQ],
        g[MEM],
        g[FAIL_PINNED],
        g[FAIL_DEPTH],
        g[FAIL_OVER],
        status,
        0,
    )


@njit
def note_decision(ev, setting, scores, op, request, victim, g, sv, stor, flat, bits, scratch, uf):
    """A decision's event (the chosen storage's score components, then the shortfall) and,
    when the step and the decision are inside the window and the decision is not omitted,
    before it every pool storage's components in pool order (then whether the policy could
    choose it), or the best g[EV_TOP] of them (`_note_best`)."""
    budget, rank = setting.budget, setting.ranks
    decision = g[N_EVICTED]
    listed = (
        g[EV_FIRST_STEP] <= g[STEP] <= g[EV_LAST_STEP]
        and g[EV_FIRST_DECISION] <= decision <= g[EV_LAST_DECISION]
        and not g[EV_OMIT_FIRST] <= decision <= g[EV_OMIT_LAST]
    )
    if listed:
        if g[EV_TOP] >= 0:
            ev = _note_best(
                ev,
                setting,
                scores,
                request,
                op,
                decision,
                victim,
                g,
                sv,
                stor,
                flat,
                bits,
                scratch,
                uf,
            )
        else:
            s = g[POOL_HEAD]
            while s >= 0:
                ev = _note_candidate(
                    ev,
                    setting,
                    scores,
                    request,
                    op,
                    decision,
                    s,
                    g,
                    sv,
                    stor,
                    flat,
                    bits,
                    scratch,
                    uf,
                )
                ev[g[EV_N] - 1, 9] = rank[s] >= g[LOCKED]
                s = sv[NEXT, s]
    ev = _note_candidate(
        ev, setting, scores, request, op, decision, victim, g, sv, stor, flat, bits, scratch, uf
    )
    ev[g[EV_N] - 1, 0] = EV_DECISION
    ev[g[EV_N] - 1, 9] = g[MEM] + request - budget
    return ev


@njit
def _note_best(
    ev, setting, scores, request, op, decision, victim, g, sv, stor, flat, bits, scratch, uf
):
    """The g[EV_TOP] best candidates the scan evaluated, in pool order, then a ranking event:
    how many it evaluated and the chosen storage's rank among them (0 when not one of them).

    Evaluated: the candidates the policy could choose, in pool order up to the first zero score
    (where a scan stops). Ranked by score, ties to the later one. A thrashing run's window holds
    tens of millions of candidates: a monotone policy's candidate's owed regions are settled
    only once its lower bound (`bound`) could put it among the best or before the chosen one.
    """
    policy, params, rank, budget = setting.policy, setting.params, setting.ranks, setting.budget
    monotone = scoring.flags(scores, policy)[4]
    ids = scratch[sv.shape[1] + 1 :]  # past a rebuild's stack, as in `compute`
    m = 0
    s = g[POOL_HEAD]
    while s >= 0:
        if rank[s] >= g[LOCKED]:
            ids[m] = s
            m += 1
        s = sv[NEXT, s]
    costs = np.empty(m)
    exact = np.zeros(m, np.bool_)
    known = (costs, exact, setting, scores, request)
    for i in range(m):
        if monotone and owes(ids[i], g, sv):
            costs[i] = bound(
                policy, scores, ids[i], g[CLOCK], params, rank, sv, stor, g, budget, request
            )
        else:
            _make_exact(i, ids, known, g, sv, stor, flat, bits, scratch, uf)
    end = m
    for i in range(m):
        if costs[i] == 0:
            _make_exact(i, ids, known, g, sv, stor, flat, bits, scratch, uf)
        if costs[i] == 0:
            end = i + 1
            break
    chosen = -1
    for i in range(end):
        if ids[i] == victim:
            chosen = i
    place = 0
    if chosen >= 0:
        _make_exact(chosen, ids, known, g, sv, stor, flat, bits, scratch, uf)
        place = 1
        for i in range(end):
            if i != chosen and costs[i] <= costs[chosen]:
                _make_exact(i, ids, known, g, sv, stor, flat, bits, scratch, uf)
                place += _ranks_before(costs, i, chosen)
    kept = np.zeros(end, np.bool_)
    n_kept = 0
    while n_kept < min(g[EV_TOP], end):
        best = -1
        for i in range(end):
            if not kept[i] and (best < 0 or _ranks_before(costs, i, best)):
                best = i
        if exact[best]:  # every other candidate's score is at least its bound
            kept[best] = True
            n_kept += 1
        else:
            _make_exact(best, ids, known, g, sv, stor, flat, bits, scratch, uf)
    for i in range(end):
        if kept[i]:
            ev = _note_candidate(
                ev,
                setting,
                scores,
                request,
                op,
                decision,
                ids[i],
                g,
                sv,
                stor,
                flat,
                bits,
                scratch,
                uf,
            )
            ev[g[EV_N] - 1, 9] = 1
    return emit(ev, g, EV_RANKING, op, decision, end, place, 0, 0, 0, 0)


@njit(inline="always")
def _ranks_before(scores, i, j) -> bool:
    """Whether candidate i ranks before candidate j: a lower score, or an equal one later."""
    return scores[i] < scores[j] or (scores[i] == scores[j] and i > j)


@njit
def _make_exact(i, ids, known, g, sv, stor, flat, bits, scratch, uf):
    """Replace candidate i's bound by its score; `known` = (costs, exact, setting, scores,
    request)."""
    costs, exact, setting, scores, request = known
    if not exact[i]:
        costs[i] = _settled_score(
            setting, scores, request, ids[i], g, sv, stor, flat, bits, scratch, uf
        )
        exact[i] = True


@njit
def _settled_score(setting, scores, request, s, g, sv, stor, flat, bits, scratch, uf) -> float:
    """s's score once its owed regions are settled."""
    policy, params, rank, budget = setting.policy, setting.params, setting.ranks, setting.budget
    settle(s, True, g, sv, stor, flat, bits, scratch)
    settle(s, False, g, sv, stor, flat, bits, scratch)
    class_value = 0
    if setting.eqclass:
        class_value = class_compute(s, sv, stor, flat, scratch, uf[0], uf[1])
    return score(
        policy, scores, s, g[CLOCK], class_value, params, rank, sv, stor, g, budget, request
    )


@njit
def _note_candidate(
    ev, setting, scores, request, op, decision, s, g, sv, stor, flat, bits, scratch, uf
):
    cost = _settled_score(setting, scores, request, s, g, sv, stor, flat, bits, scratch, uf)
    e_star = sv[COMPUTE, s] + sv[FWD_C, s] + sv[REV_C, s]
    staleness = g[CLOCK] - sv[LAST, s]
    size, count = stor[S_SIZE, s], nbhd(s, sv)
    return emit(ev, g, EV_CANDIDATE, op, decision, s, e_star, size, staleness, count, cost)
