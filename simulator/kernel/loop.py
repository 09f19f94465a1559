"""The replay loop: the schedule's commands and simrd's _materialize as a stack machine."""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from simulator.kernel.choice import choose
from simulator.kernel.operations import compute, create_outputs, evict
from simulator.kernel.pool import lock, unlock
from simulator.kernel.recording import emit, note_decision, note_fail
from simulator.kernel.regions import settle_all
from simulator.kernel.state import (
    CLOCK,
    COMPUTE_CMD,
    DEPTH,
    EAGER,
    EV_ALLOC,
    EV_EVICT,
    EV_FREE,
    EV_ON,
    EV_REBUILT,
    EV_REMAT,
    EVICTED,
    EVICTIONS,
    FAIL_DEPTH,
    FAIL_OP,
    FAIL_OVER,
    FAIL_PINNED,
    FAIL_REQ,
    GET_CMD,
    HI,
    IN_POOL,
    INVALID_CHOICE,
    LAST,
    LO,
    MATERIAL,
    MAX_DEPTH,
    MEM,
    N_EVICTED,
    N_NODES,
    OOM,
    PEAK_PINNED,
    PEAK_PINNED_DEPTH,
    PIN_CMD,
    PINNED,
    POOL_BYTES,
    POOL_HEAD,
    REF_EXT,
    REF_INT,
    REMAT_C,
    RUNNING,
    STEP,
    THRASHED,
    Setting,
    State,
)
from simulator.layout import OP_ARGS, OP_OUT, OP_TOTAL, S_SIZE, T_OP, T_STORAGE, Layout


# Only the replay is cached: numba checks a cached function against its own file alone, so a
# cached helper would be linked, stale, into a replay compiled after another module changed.
# The replay's own key covers every module of the package (see scoring.ScoreSet).
@njit(cache=True)
def replay(L: Layout, st: State, work, uf, setting: Setting, scores, start, end):
    """Replay schedule commands `start`..`end - 1`; returns (status, work, uf), the last two
    possibly reallocated: RUNNING when every command ran, with counters in st.g.

    Between commands no rematerialization is in progress (frames and snap are empty), so
    (st, the eviction log, uf) after command i is the whole state a replay continues from.
    Events are recorded when g[EV_ON] is set, with candidates at steps (the operators the
    schedule runs, rematerializations aside) g[EV_FIRST_STEP] to g[EV_LAST_STEP], of the
    decisions numbered g[EV_FIRST_DECISION] to g[EV_LAST_DECISION] among them, except those
    numbered g[EV_OMIT_FIRST] to g[EV_OMIT_LAST].

    `scores`: the compiled score set holding the setting's policy (scoring.ScoreSet), apart
    from `setting` so that numba types the setting on its fast path at every call (it cannot
    fingerprint a score set: with one inside, it typed the setting in Python, 5x the call).
    """
    L, st, setting = _views(L, st, setting)
    regions, eqclass = setting.regions, setting.eqclass
    ops, tens, stor, flat, cmds = L
    g, sv, defined, bits, scratch = st
    status = RUNNING
    for i in range(start, end):
        kind, arg = cmds[0, i], cmds[1, i]
        if kind == COMPUTE_CMD:
            first, last = ops[OP_OUT, arg], ops[OP_OUT, arg + 1]
            g[STEP] = arg
            uf = _room_for_class(uf, g, eqclass, last - first)
            settle_all(g, sv, stor, flat, bits, scratch)
            create_outputs(arg, regions, eqclass, g, sv, ops, tens, flat, bits, uf)
            status, work, uf = materialize(L, st, setting, scores, first, False, work, uf)
            for t in range(first, last):
                sv[LAST, tens[T_STORAGE, t]] = g[CLOCK]
        elif kind == GET_CMD:
            sv[REF_EXT, tens[T_STORAGE, arg]] += 1
        elif kind == PIN_CMD:
            s = tens[T_STORAGE, arg]
            if not defined[arg]:
                status, work, uf = materialize(L, st, setting, scores, arg, True, work, uf)
            if status == RUNNING and not sv[PINNED, s]:
                lock(g, sv, stor, s)
                sv[PINNED, s] = 1
        else:  # RELEASE: the last reference gone, the storage is freed at once
            s = tens[T_STORAGE, arg]
            sv[REF_EXT, s] -= 1
            if sv[REF_EXT, s] == 0 and sv[MATERIAL, s] and not sv[PINNED, s]:
                uf = _room_for_class(uf, g, eqclass, 1)
                evict(s, regions, eqclass, g, sv, stor, flat, defined, bits, scratch, *uf)
                g[EAGER] += 1
                if g[EV_ON]:
                    ev = emit(work[3], g, EV_FREE, g[STEP], i, s, stor[S_SIZE, s], g[MEM], 0, 0, 0)
                    work = (work[0], work[1], work[2], ev)
        if status != RUNNING:
            break
    return status, work, uf


@njit
def materialize(L, st, setting, scores, t0, remat0, work, uf):
    """simrd's _materialize as an explicit stack machine (no recursion limit).

    `work` = (frames, snap, log, events). Frame columns: tensor, remat flag, phase, first and
    end index of its snapshot of undefined parents in `snap`, position in that snapshot.
    Returns (status, work, uf), the last two possibly reallocated.
    """
    ops, tens, stor, flat = L.ops, L.tens, L.stor, L.flat
    g, sv, defined, bits, scratch = st
    frames, snap, log, ev = work
    budget, regions, eqclass = setting.budget, setting.regions, setting.eqclass
    top = _enter(g, frames, 0, t0, remat0)
    if remat0 and g[EV_ON]:
        ev = emit(ev, g, EV_REMAT, tens[T_OP, t0], t0, tens[T_STORAGE, t0], g[DEPTH], 0, 0, 0, 0)
    snap_top = 0
    while top:
        k = top - 1
        t, phase = frames[k, 0], frames[k, 2]
        op = tens[T_OP, t]
        a0, a1 = ops[OP_ARGS, op], ops[OP_ARGS, op + 1]
        if phase == 0:
            for j in range(a0, a1):
                sv[LAST, tens[T_STORAGE, flat[j]]] = g[CLOCK]
            for j in range(a0, a1):
                if defined[flat[j]]:
                    lock(g, sv, stor, tens[T_STORAGE, flat[j]])
            frames[k, 3] = snap_top
            for j in range(a0, a1):
                if not defined[flat[j]]:
                    snap[snap_top] = flat[j]
                    snap_top += 1
            frames[k, 4], frames[k, 5], frames[k, 2] = snap_top, frames[k, 3], 1
        elif phase == 1:
            pos = frames[k, 5]
            if pos == frames[k, 4]:
                frames[k, 2] = 3
            elif defined[snap[pos]]:
                lock(g, sv, stor, tens[T_STORAGE, snap[pos]])
                frames[k, 5] = pos + 1
            else:
                frames[k, 2] = 2
                top = _enter(g, frames, top, snap[pos], True)
                if g[EV_ON]:
                    u = snap[pos]
                    ev = emit(
                        ev, g, EV_REMAT, tens[T_OP, u], u, tens[T_STORAGE, u], g[DEPTH], 0, 0, 0, 0
                    )
        elif phase == 2:
            lock(g, sv, stor, tens[T_STORAGE, snap[frames[k, 5]]])
            frames[k, 5] += 1
            frames[k, 2] = 1
        else:
            request = ops[OP_TOTAL, op]
            remat = frames[k, 1] != 0
            _sample_pinned(g)
            if g[EV_ON]:
                pinned, short = g[MEM] - g[POOL_BYTES], g[MEM] + request - budget
                ev = emit(ev, g, EV_ALLOC, op, request, g[MEM], pinned, g[DEPTH], short, remat, 0)
            while not _fits(g, request, budget):
                # An empty pool, or one holding only retained storages: nothing to evict.
                victim = -1
                if g[POOL_HEAD] >= 0:
                    victim = choose(setting, scores, request, g, sv, stor, flat, bits, scratch, uf)
                if victim < 0:
                    _fail(g, op, request, g[MEM] + request - budget)
                    return OOM, (frames, snap, log, note_fail(ev, g, OOM)), uf
                if not _evictable(victim, sv):
                    return INVALID_CHOICE, (frames, snap, log, ev), uf
                if g[EV_ON]:
                    ev = note_decision(
                        ev,
                        setting,
                        scores,
                        op,
                        request,
                        victim,
                        g,
                        sv,
                        stor,
                        flat,
                        bits,
                        scratch,
                        uf,
                    )
                log = _grown(log, g[N_EVICTED] + 1)
                log[g[N_EVICTED]] = victim
                sv[EVICTED, victim] += 1
                g[N_EVICTED] += 1
                g[EVICTIONS] += 1
                uf = _room_for_class(uf, g, eqclass, 1)
                evict(victim, regions, eqclass, g, sv, stor, flat, defined, bits, scratch, *uf)
                if g[EV_ON]:
                    size = stor[S_SIZE, victim]
                    ev = emit(ev, g, EV_EVICT, op, g[N_EVICTED] - 1, victim, size, g[MEM], 0, 0, 0)
            compute(t, remat, regions, g, sv, ops, tens, stor, flat, defined, bits, scratch, uf)
            for j in range(a0, a1):
                unlock(g, sv, stor, tens[T_STORAGE, flat[j]])
            if remat and g[EV_ON]:
                ev = emit(ev, g, EV_REBUILT, op, t, tens[T_STORAGE, t], g[DEPTH], 0, 0, 0, 0)
            if g[REMAT_C] > setting.remat_limit:
                _fail(g, op, request, g[MEM] - budget)
                return THRASHED, (frames, snap, log, note_fail(ev, g, THRASHED)), uf
            top -= 1
            snap_top = frames[k, 3]
            if frames[k, 1]:
                g[DEPTH] -= 1
    return RUNNING, (frames, snap, log, ev), uf


@njit(inline="always")
def _grown(a: np.ndarray, need: int) -> np.ndarray:
    if need <= len(a):
        return a
    b = np.zeros(max(need, 2 * len(a)), a.dtype)
    b[: len(a)] = a
    return b


@njit
def _sample_pinned(g: np.ndarray) -> None:
    pinned = g[MEM] - g[POOL_BYTES]
    if pinned > g[PEAK_PINNED]:
        g[PEAK_PINNED] = pinned
        g[PEAK_PINNED_DEPTH] = g[DEPTH]


@njit
def _fail(g: np.ndarray, op: int, request: int, over: int) -> None:
    g[FAIL_OP] = op
    g[FAIL_REQ] = request
    g[FAIL_PINNED] = g[MEM] - g[POOL_BYTES]
    g[FAIL_DEPTH] = g[DEPTH]
    g[FAIL_OVER] = over


@njit
def _fits(g: np.ndarray, request: int, budget: int) -> bool:
    """simrd's `memory + request > budget` test, narrowing the certified budget interval."""
    need = g[MEM] + request
    if need > budget:
        g[HI] = min(g[HI], need - 1)
        return False
    g[LO] = max(g[LO], need)
    return True


@njit
def _enter(g: np.ndarray, frames: np.ndarray, top: int, t: int, remat: bool) -> int:
    frames[top, 0], frames[top, 1], frames[top, 2] = t, remat, 0
    if remat:
        g[DEPTH] += 1
        g[MAX_DEPTH] = max(g[MAX_DEPTH], g[DEPTH])
    return top + 1


@njit
def _evictable(s: int, sv: np.ndarray) -> bool:
    """The policy contract: a victim is material, unlocked and in the evictable pool."""
    return s >= 0 and sv[IN_POOL, s] and sv[MATERIAL, s] and sv[REF_INT, s] == 0


@njit
def _room_for_class(uf, g: np.ndarray, eqclass: bool, more: int):
    """Classes take one union-find node per new storage and per eviction; grow on demand."""
    if not eqclass:
        return uf
    need = g[N_NODES] + more
    return _grown(uf[0], need), _grown(uf[1], need)


@intrinsic
def _borrow(typingctx, a):
    """A view of array a without a reference count, valid while a lives (a replay's arguments
    outlive the replay). Each helper call increments and decrements, atomically, the count of
    every counted array it takes: 20-40% of a thrashing run's time before these views."""

    def codegen(context, builder, sig, args):
        view = context.make_array(sig.args[0])(context, builder, value=args[0])
        view.meminfo = context.get_constant_null(types.MemInfoPointer(types.voidptr))
        view.parent = context.get_constant_null(types.pyobject)
        return view._getvalue()

    return a(a), codegen


@njit(inline="always")
def _views(L: Layout, st: State, setting: Setting):
    """The layout, state and setting of a replay, every array a `_borrow` view."""
    b, s = _borrow, setting
    return (
        Layout(b(L.ops), b(L.tens), b(L.stor), b(L.flat), b(L.cmds)),
        State(b(st.g), b(st.sv), b(st.defined), b(st.bits), b(st.scratch)),
        Setting(
            s.budget,
            s.remat_limit,
            s.policy,
            b(s.params),
            b(s.ranks),
            s.regions,
            s.eqclass,
        ),
    )
