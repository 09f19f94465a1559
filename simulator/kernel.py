"""The compiled replay loop: simrd's RuntimeV2EagerOptimized decisions, step for step, on arrays.

State is a handful of dense arrays: scalars in `g`, per-storage fields as rows of `sv`, region
bitsets as planes of `bits` (one row of words per storage). Regions (evicted neighbourhoods)
are absorbed exactly where simrd absorbs them and rebuilt to the same values it rebuilds, so
the region compute values, and with them every score, equal simrd's (see `_owe` for the
rebuilds done later than simrd's, `_shrink` for those done without a search). Functions take
the few arrays they need, and `replay` hands them on as views without a reference count
(`_borrow`): each counted array passed costs two atomic updates, which dominated earlier
versions.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from simulator import scoring
from simulator.layout import (
    OP_ARGS,
    OP_COST,
    OP_FWD_GROWTH,
    OP_OUT,
    OP_REV_GROWTH,
    OP_TOTAL,
    S_FWD,
    S_REV,
    S_ROOT,
    S_SIZE,
    S_TENSORS,
    T_GAIN,
    T_OP,
    T_SIZE,
    T_STORAGE,
    Layout,
)

# Scalars in g
MEM, CLOCK, MODEL_C, REMAT_C, PEAK = 0, 1, 2, 3, 4
EVALS, EVICTIONS, EAGER, REMATS, DEPTH, MAX_DEPTH = 5, 6, 7, 8, 9, 10
PEAK_PINNED, PEAK_PINNED_DEPTH, POOL_HEAD, POOL_TAIL, POOL_BYTES = 11, 12, 13, 14, 15
LO, HI, FAIL_OP, FAIL_REQ, FAIL_PINNED, FAIL_DEPTH, FAIL_OVER = 16, 17, 18, 19, 20, 21, 22
N_NODES, N_EVICTED, FALLBACKS, N_DUE, N_LISTED = 23, 24, 25, 26, 27
EV_ON, EV_N, EV_FIRST_STEP, EV_LAST_STEP, LOCKED, STEP = 28, 29, 30, 31, 32, 33
EXACT = 34  # the stamp of regions that equal their rebuild from scratch (see _exact)
EV_TOP = 35  # candidates kept per decision in the window (-1: every one; see _note_best)
EV_FIRST_DECISION, EV_LAST_DECISION = 36, 37  # and only these decisions' (numbered from 0)
EV_OMIT_FIRST, EV_OMIT_LAST = 38, 39  # but not these (none when first > last)
N_SCALARS = 40

# Rows of sv, one column per storage
LAST, COMPUTE, FWD_C, REV_C, NODE, REF_INT, REF_EXT, NEXT, PREV = 0, 1, 2, 3, 4, 5, 6, 7, 8
N_TENSORS, N_FWD, N_REV, MATERIAL, PINNED, IN_POOL = 9, 10, 11, 12, 13, 14
FWD_COUNT, REV_COUNT = 15, 16  # storages in each region's interior (|e*| = their sum)
FWD_DUE, REV_DUE = 17, 18  # the region's rebuild is deferred until it is read (see _owe)
LISTED, DUE_LIST = 19, 20  # storages that may owe a rebuild: flag, and the first N_LISTED ids
FWD_EXACT, REV_EXACT = 21, 22  # g[EXACT] when the region is known to equal its rebuild
PASSED = 23  # 1 + the first decision whose TwoPhase k largest held s unchosen (0: none yet)
FWD_LAG = 24  # 1 + the operator whose pending outputs the forward region lags behind (see _lags)
EVICTED = 25  # evictions of the storage by the policy so far
N_FIELDS = 26

# Planes of bits: interior and frontier of each storage's forward and reverse region
FWD_INT, FWD_FR, REV_INT, REV_FR = 0, 1, 2, 3

RUNNING, DONE, OOM, THRASHED, INVALID_CHOICE = 0, 1, 2, 3, 4
COMPUTE_CMD, GET_CMD, PIN_CMD = 0, 1, 2  # else RELEASE (see trace.py)
NO_LIMIT = np.int64(2**62)

# Event kinds, the first column of an event row (see events.py for the other columns)
EV_ALLOC, EV_DECISION, EV_CANDIDATE, EV_EVICT, EV_REMAT, EV_REBUILT, EV_FREE, EV_FAIL = range(8)
EV_RANKING = 8
EV_COLS = 11  # kind, eight values, a kind's extra value, the step (see events.py)

_U1 = np.uint64(1)

State = namedtuple("State", ["g", "sv", "defined", "bits", "scratch"])


def new_state(layout: Layout, regions: bool) -> State:
    """Fresh state for one replay; region bitsets only when the policy reads regions."""
    n_s, n_t = layout.stor.shape[1] - 1, layout.tens.shape[1]
    g = np.zeros(N_SCALARS, dtype=np.int64)
    g[CLOCK], g[POOL_HEAD], g[POOL_TAIL], g[HI], g[FAIL_OP] = 1, -1, -1, NO_LIMIT, -1
    g[EXACT], g[EV_LAST_DECISION], g[EV_OMIT_FIRST] = 1, NO_LIMIT, NO_LIMIT
    sv = np.zeros((N_FIELDS, n_s), dtype=np.int64)
    sv[NEXT] = sv[PREV] = sv[NODE] = -1
    shape = (4, n_s, (n_s + 63) // 64) if regions else (4, 1, 1)
    return State(
        g=g,
        sv=sv,
        defined=np.zeros(n_t, np.uint8),
        bits=np.zeros(shape, np.uint64),
        # A stack or list of storages (rebuilds, members, neighbours: at most 2 n_s), and past
        # its first n_s + 1 entries (a rebuild's stack) the storages an operator makes material.
        scratch=np.zeros(2 * n_s + 2, np.int64),
    )


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


@njit(cache=True, inline="always")
def _views(L: Layout, st: State, rule, scores):
    """The layout, state and rule (with the score set) of a replay, every array a `_borrow`
    view."""
    b = _borrow
    return (
        Layout(b(L.ops), b(L.tens), b(L.stor), b(L.flat), b(L.cmds)),
        State(b(st.g), b(st.sv), b(st.defined), b(st.bits), b(st.scratch)),
        (rule[0], b(rule[1]), b(rule[2]), scores),
    )


# ---------------------------------------------------------------- pool (insertion-ordered set)


@njit(cache=True)
def pool_add(g: np.ndarray, sv: np.ndarray, s: int, size: int) -> None:
    if sv[IN_POOL, s]:
        return
    tail = g[POOL_TAIL]
    sv[PREV, s], sv[NEXT, s] = tail, -1
    if tail >= 0:
        sv[NEXT, tail] = s
    else:
        g[POOL_HEAD] = s
    g[POOL_TAIL] = s
    sv[IN_POOL, s] = 1
    g[POOL_BYTES] += size


@njit(cache=True)
def pool_remove(g: np.ndarray, sv: np.ndarray, s: int, size: int) -> None:
    if not sv[IN_POOL, s]:
        return
    prev, nxt = sv[PREV, s], sv[NEXT, s]
    if prev >= 0:
        sv[NEXT, prev] = nxt
    else:
        g[POOL_HEAD] = nxt
    if nxt >= 0:
        sv[PREV, nxt] = prev
    else:
        g[POOL_TAIL] = prev
    sv[IN_POOL, s] = 0
    g[POOL_BYTES] -= size


@njit(cache=True)
def lock(g: np.ndarray, sv: np.ndarray, stor: np.ndarray, s: int) -> None:
    if sv[REF_INT, s] == 0:
        pool_remove(g, sv, s, stor[S_SIZE, s])
    sv[REF_INT, s] += 1


@njit(cache=True)
def unlock(g: np.ndarray, sv: np.ndarray, stor: np.ndarray, s: int) -> None:
    sv[REF_INT, s] -= 1
    if sv[REF_INT, s] == 0:
        pool_add(g, sv, s, stor[S_SIZE, s])


# ---------------------------------------------------------------- bitsets

_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_SHIFT = np.uint64(58)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * int(_DEBRUIJN) % 2**64) >> 58] = _i


@njit(cache=True, inline="always")
def _low_bit(word: np.uint64) -> int:
    """Index of the lowest set bit (word != 0), by de Bruijn multiplication."""
    return _DEBRUIJN_INDEX[((word & (~word + _U1)) * _DEBRUIJN) >> _DEBRUIJN_SHIFT]


@njit(cache=True, inline="always")
def _has(bits: np.ndarray, plane: int, row: int, i: int) -> bool:
    return (bits[plane, row, i >> 6] >> np.uint64(i & 63)) & _U1 != 0


@njit(cache=True, inline="always")
def _set(bits: np.ndarray, plane: int, row: int, i: int) -> None:
    bits[plane, row, i >> 6] |= _U1 << np.uint64(i & 63)


@njit(cache=True, inline="always")
def _clear(bits: np.ndarray, plane: int, row: int, i: int) -> None:
    bits[plane, row, i >> 6] &= ~(_U1 << np.uint64(i & 63))


@njit(cache=True)
def members(bits: np.ndarray, plane: int, row: int, out: np.ndarray) -> int:
    """Write the set bits of one row into `out`, ascending; return how many."""
    n = 0
    for w in range(bits.shape[2]):
        word = bits[plane, row, w]
        while word:
            out[n] = w * 64 + _low_bit(word)
            n += 1
            word &= word - _U1
    return n


# ---------------------------------------------------------------- regions


@njit(cache=True)
def rebuild(base, forward, g, sv, stor, flat, bits, stack) -> None:
    """Recompute base's region from scratch: evicted storages reachable until material ones."""
    interior, frontier = (FWD_INT, FWD_FR) if forward else (REV_INT, REV_FR)
    ptr, visible = (S_FWD, N_FWD) if forward else (S_REV, N_REV)
    bits[interior, base, :] = 0
    bits[frontier, base, :] = 0
    compute = 0
    count = 0
    stack[0] = base
    top = 1
    while top:
        top -= 1
        s = stack[top]
        for j in range(stor[ptr, s], stor[ptr, s] + sv[visible, s]):
            u = flat[j]
            if sv[MATERIAL, u]:
                if u != base:
                    _set(bits, frontier, base, u)
            elif not _has(bits, interior, base, u):
                compute += sv[COMPUTE, u]
                count += 1
                _set(bits, interior, base, u)
                stack[top] = u
                top += 1
    sv[FWD_C if forward else REV_C, base] = compute
    sv[FWD_COUNT if forward else REV_COUNT, base] = count
    sv[FWD_EXACT if forward else REV_EXACT, base] = g[EXACT]
    if forward:
        sv[FWD_LAG, base] = 0


@njit(cache=True)
def absorb(p: int, s: int, forward: bool, g: np.ndarray, sv: np.ndarray, bits: np.ndarray) -> None:
    """p's region takes in just-evicted s (on its frontier) together with s's own region.

    The union is what a rebuild would find when both regions were exact (see _exact), and
    when p's lags (see _lags) what it would find without the pending outputs.
    """
    interior, frontier = (FWD_INT, FWD_FR) if forward else (REV_INT, REV_FR)
    bits[frontier, p, s >> 6] &= ~(_U1 << np.uint64(s & 63))
    added = 0
    count = 0
    for w in range(bits.shape[2]):
        bits[frontier, p, w] |= bits[frontier, s, w]
        fresh = bits[interior, s, w] & ~bits[interior, p, w]
        if w == s >> 6:
            fresh |= _U1 << np.uint64(s & 63)  # s joins the interior, counted even if present
        bits[interior, p, w] |= fresh
        while fresh:
            added += sv[COMPUTE, w * 64 + _low_bit(fresh)]
            count += 1
            fresh &= fresh - _U1
    sv[FWD_C if forward else REV_C, p] += added
    sv[FWD_COUNT if forward else REV_COUNT, p] += count
    exact = FWD_EXACT if forward else REV_EXACT
    if sv[exact, s] != g[EXACT] or _has(bits, frontier, p, p):
        sv[exact, p] = 0  # (a rebuild never puts p on its own frontier, a cycle through s can)


@njit(cache=True, inline="always")
def _owe(base, forward, g, sv) -> None:
    """Mark base's region as owing the rebuild simrd does here; `settle` runs it later.

    Most of these rebuilds are overwritten by another before anything reads them, and they
    were most of the time of thrashing runs. A region is read only when its storage is scored,
    evicted or absorbs an eviction, and it is settled just before. Rebuilt then, it gets the
    value simrd's rebuild got: in between, nothing changed what a rebuild from scratch finds.
    An eviction on its frontier would have made it absorb (a read); a computed storage of its
    interior makes it owed again; the graph and the compute values change only in
    `_create_outputs`, before which every owed region is settled.
    """
    due = FWD_DUE if forward else REV_DUE
    if not sv[due, base]:
        sv[due, base] = 1
        g[N_DUE] += 1
        if not sv[LISTED, base]:
            sv[LISTED, base] = 1
            sv[DUE_LIST, g[N_LISTED]] = base
            g[N_LISTED] += 1


@njit(cache=True, inline="always")
def _lags(p, op, g, sv) -> bool:
    """Whether material p's forward region, gaining edges to op's outputs, can lag behind them
    instead of losing its stamp: op's outputs are new storages (none of its tensors on an
    existing one), its inputs are all material, and p is unpinned, its region exact or
    already lagging behind op (nothing is owed when outputs are created, see _settle_all).

    A lagging region equals its rebuild without the edges to op's outputs, which simrd keeps
    until their computation rebuilds it. A new storage has no edges of its own, and the
    inputs stay material (locked) until op runs: no other region reaches the outputs, and a
    rebuild of p's finds the same frontier and the outputs p leads to in its interior. An
    absorb keeps the lag, and when op's outputs are computed they join the frontier
    (`_shrink`) and the lag ends (see compute). Inputs' forward regions owed a rebuild at
    every operator were most of the rebuilds of runs without evictions.
    """
    return (
        not sv[PINNED, p]
        and sv[FWD_EXACT, p] == g[EXACT]
        and (sv[FWD_LAG, p] == 0 or sv[FWD_LAG, p] == op + 1)
    )


@njit(cache=True, inline="always")
def _exact(base, forward, g, sv) -> bool:
    """Whether base's region is known to equal its rebuild from scratch.

    simrd rebuilds some regions from scratch and keeps the others up to date, which can drift
    from a rebuild (a new operator's edges, a cycle through an alias). A rebuild stamps the
    region with g[EXACT]; a region whose storage gains compute or an edge it follows loses its
    stamp (`_touch`); an absorb keeps it when both regions had it, and so does `_shrink`; an
    eviction that simrd's drifted frontiers hide from a region takes its stamp
    (`_unstamp_missed`). A new stamp makes every region unknown: taken when a storage that is
    not material gains an edge or compute (nothing lists the regions holding it), unless the
    edge leads to a new storage (then `_unstamp_holders` finds the regions it changes). An owed
    forward region whose stamp is g[EXACT] is not exact, but its frontier row holds every
    storage of its rebuild's frontier (see `_ahead`). A lagging forward region (see _lags)
    is stamped but not exact.
    """
    return (
        not sv[FWD_DUE if forward else REV_DUE, base]
        and sv[FWD_EXACT if forward else REV_EXACT, base] == g[EXACT]
        and not (forward and sv[FWD_LAG, base])
    )


@njit(cache=True)
def _unstamp_missed(base, forward, g, sv, stor, flat, bits, stack) -> None:
    """base is about to be evicted: if its region is not known exact, compare it with its
    rebuild. If it drifted, simrd keeps and absorbs the drifted value, so base's stamp stays
    lost (and with it the stamps of the regions absorbing it, see absorb), and the regions on
    the rebuilt frontier but not on the kept one lose theirs: from scratch they take base in,
    but no absorb tells them."""
    if _exact(base, forward, g, sv):
        return
    interior, frontier = (FWD_INT, FWD_FR) if forward else (REV_INT, REV_FR)
    count, compute = (FWD_COUNT, FWD_C) if forward else (REV_COUNT, REV_C)
    kept_interior = bits[interior, base, :].copy()
    kept_frontier = bits[frontier, base, :].copy()
    kept_count, kept_compute = sv[count, base], sv[compute, base]
    rebuild(base, forward, g, sv, stor, flat, bits, stack)
    if (
        sv[count, base] == kept_count
        and sv[compute, base] == kept_compute
        and (bits[interior, base, :] == kept_interior).all()
        and (bits[frontier, base, :] == kept_frontier).all()
    ):
        return
    missed = REV_EXACT if forward else FWD_EXACT  # the direction in which they take base in
    for w in range(bits.shape[2]):
        word = bits[frontier, base, w] & ~kept_frontier[w]
        while word:
            sv[missed, w * 64 + _low_bit(word)] = 0
            word &= word - _U1
    bits[interior, base, :] = kept_interior
    bits[frontier, base, :] = kept_frontier
    sv[count, base], sv[compute, base] = kept_count, kept_compute
    sv[FWD_EXACT if forward else REV_EXACT, base] = 0


@njit(cache=True, inline="always")
def _support(x, base, forward, sv, stor, flat, bits) -> None:
    """Put material x on base's frontier iff base or a storage of its interior leads to x."""
    interior, frontier = (FWD_INT, FWD_FR) if forward else (REV_INT, REV_FR)
    ptr, visible = (S_REV, N_REV) if forward else (S_FWD, N_FWD)  # who leads to x
    if x == base:
        return
    for j in range(stor[ptr, x], stor[ptr, x] + sv[visible, x]):
        z = flat[j]
        if z == base or _has(bits, interior, base, z):
            _set(bits, frontier, base, x)
            return
    _clear(bits, frontier, base, x)


@njit(cache=True)
def _shrink(base, forward, fresh, n_fresh, g, sv, stor, flat, bits) -> bool:
    """Give base's exact region the value its rebuild would find now that `fresh` are
    material, when each fresh storage of its interior has an empty region in that direction
    (then nothing else was reached through it); False, changing nothing, otherwise.

    The interior loses those storages, each fresh storage and each of their (material)
    neighbours is on the frontier iff base or a remaining interior storage leads to it; other
    frontier storages keep what led to them.
    """
    if not _exact(base, forward, g, sv):
        return False
    interior = FWD_INT if forward else REV_INT
    count, compute = (FWD_COUNT, FWD_C) if forward else (REV_COUNT, REV_C)
    ptr, visible = (S_FWD, N_FWD) if forward else (S_REV, N_REV)
    due = FWD_DUE if forward else REV_DUE  # a fresh storage's owed region is not empty
    for i in range(n_fresh):
        if _has(bits, interior, base, fresh[i]) and (sv[count, fresh[i]] or sv[due, fresh[i]]):
            return False
    for i in range(n_fresh):
        r = fresh[i]
        if _has(bits, interior, base, r):
            _clear(bits, interior, base, r)
            sv[compute, base] -= sv[COMPUTE, r]
            sv[count, base] -= 1
    for i in range(n_fresh):
        r = fresh[i]
        _support(r, base, forward, sv, stor, flat, bits)
        for j in range(stor[ptr, r], stor[ptr, r] + sv[visible, r]):
            if sv[MATERIAL, flat[j]]:
                _support(flat[j], base, forward, sv, stor, flat, bits)
    return True


@njit(cache=True, inline="always")
def settle(base, forward, g, sv, stor, flat, bits, stack) -> None:
    """Rebuild base's region if a rebuild is owed (see _owe)."""
    due = FWD_DUE if forward else REV_DUE
    if sv[due, base]:
        sv[due, base] = 0
        g[N_DUE] -= 1
        rebuild(base, forward, g, sv, stor, flat, bits, stack)


@njit(cache=True)
def _settle_listed(bases, forward, g, sv, stor, flat, bits, stack) -> None:
    for w in range(len(bases)):
        word = bases[w]
        while word:
            settle(w * 64 + _low_bit(word), forward, g, sv, stor, flat, bits, stack)
            word &= word - _U1


@njit(cache=True)
def _settle_all(g, sv, stor, flat, bits, stack) -> None:
    """Settle every owed region: the graph or the compute values are about to change.

    Owed regions are found through the list of storages deferred to since the last call, not
    by a pass over all storages, which took most of the time of runs without evictions.
    """
    for i in range(g[N_LISTED]):
        s = sv[DUE_LIST, i]
        settle(s, True, g, sv, stor, flat, bits, stack)
        settle(s, False, g, sv, stor, flat, bits, stack)
        sv[LISTED, s] = 0
    g[N_LISTED] = 0


@njit(cache=True)
def _settle_bordering(s, g, sv, stor, flat, bits, stack) -> None:
    """Settle s's regions and the regions bordering s: its eviction is about to change them.

    Every owed region's storage is listed: when the list is shorter than a row of bits, going
    through it finds the owed bordering regions faster than going through s's frontiers.
    """
    if not g[N_DUE]:
        return
    settle(s, True, g, sv, stor, flat, bits, stack)
    settle(s, False, g, sv, stor, flat, bits, stack)
    if g[N_LISTED] < bits.shape[2]:
        for i in range(g[N_LISTED]):
            p = sv[DUE_LIST, i]
            if _has(bits, REV_FR, s, p):
                settle(p, True, g, sv, stor, flat, bits, stack)
            if _has(bits, FWD_FR, s, p):
                settle(p, False, g, sv, stor, flat, bits, stack)
    else:
        _settle_listed(bits[REV_FR, s, :], True, g, sv, stor, flat, bits, stack)
        _settle_listed(bits[FWD_FR, s, :], False, g, sv, stor, flat, bits, stack)


@njit(cache=True)
def _rebuild_around(fresh, n_fresh, g, sv, stor, flat, bits, stack) -> None:
    """Rebuild the regions of new material storages; the regions that held them shrink to
    their rebuild (`_shrink`) or owe it (`_owe`). Pinned storages' regions are never read (a
    pinned storage is never scored, evicted or freed): simrd maintains them, skipping them
    changes no decision.

    A single fresh storage's forward region is owed too when `_ahead` can tell without it
    which reverse regions it borders: in a chain of rematerializations the next one makes it
    owed anyway, and these rebuilds were most of the time of thrashing runs. An owed forward
    region keeps a superset of its rebuild's frontier in its frontier row, for `_ahead`.
    """
    affected = np.zeros(bits.shape[2], np.uint64)
    affected_rev = np.zeros(bits.shape[2], np.uint64)
    for i in range(n_fresh):
        rebuild(fresh[i], False, g, sv, stor, flat, bits, stack)
        affected |= bits[REV_FR, fresh[i], :]
    if n_fresh == 1 and _ahead(fresh[0], g, sv, stor, flat, bits, affected_rev):
        _owe(fresh[0], True, g, sv)
    else:
        for i in range(n_fresh):
            rebuild(fresh[i], True, g, sv, stor, flat, bits, stack)
            affected_rev |= bits[FWD_FR, fresh[i], :]
    for forward, bases in ((True, affected), (False, affected_rev)):
        for w in range(len(bases)):
            word = bases[w]
            while word:
                base = w * 64 + _low_bit(word)
                if not sv[PINNED, base] and not _shrink(
                    base, forward, fresh, n_fresh, g, sv, stor, flat, bits
                ):
                    if forward:  # its rebuild's frontier may now hold the fresh storages
                        for i in range(n_fresh):
                            _set(bits, FWD_FR, base, fresh[i])
                    _owe(base, forward, g, sv)
                word &= word - _U1


@njit(cache=True)
def _ahead(s, g, sv, stor, flat, bits, out) -> bool:
    """Put into `out` the storages on just-computed s's forward frontier (its rebuild's) whose
    reverse regions are read (not pinned, not owed), from those regions instead: s is in one's
    interior iff it is on s's frontier, when that region is exact (see _exact). Candidates:
    a storage p bordering s from behind whose forward region is exact, or owed with its stamp
    kept, and p's frontier row, which then holds every storage of its rebuild's frontier; s's
    frontier is part of p's. s's forward region is then owed, its frontier row a superset of
    the rebuild's and stamped. False, changing nothing, when s's forward region is empty, when
    there is no such p, when p's exact region holds fewer storages than a row has words (a
    rebuild of s's costs less than a pass over the row), or when a candidate's reverse region
    is not known exact.
    """
    leads = False
    for j in range(stor[S_FWD, s], stor[S_FWD, s] + sv[N_FWD, s]):
        if not sv[MATERIAL, flat[j]]:
            leads = True
            break
    if not leads:
        return False
    behind = -1
    for w in range(bits.shape[2]):
        word = bits[REV_FR, s, w]
        while word and behind < 0:
            p = w * 64 + _low_bit(word)
            if not sv[PINNED, p] and sv[FWD_EXACT, p] == g[EXACT]:
                behind = p
            word &= word - _U1
        if behind >= 0:
            break
    if behind < 0 or (not sv[FWD_DUE, behind] and sv[FWD_COUNT, behind] < bits.shape[2]):
        return False
    for write in (False, True):
        for w in range(bits.shape[2]):
            word = bits[FWD_FR, behind, w]
            if w == behind >> 6:
                word |= _U1 << np.uint64(behind & 63)  # a cycle through an alias can lead back
            while word:
                x = w * 64 + _low_bit(word)
                if x != s and sv[MATERIAL, x] and not sv[PINNED, x]:
                    unknown = sv[REV_DUE, x] != 0
                    if not unknown and sv[REV_EXACT, x] != g[EXACT]:
                        return False
                    if write and (unknown or _has(bits, REV_INT, x, s)):
                        _set(bits, FWD_FR, s, x)  # (the row of a storage not material is 0)
                        if not unknown:
                            out[w] |= _U1 << np.uint64(x & 63)
                word &= word - _U1
    sv[FWD_EXACT, s] = g[EXACT]
    return True


# ---------------------------------------------------------------- equivalence classes


@njit(cache=True, inline="always")
def find(parent: np.ndarray, node: int) -> int:
    root = node
    while parent[root] != root:
        root = parent[root]
    while parent[node] != root:
        parent[node], node = root, parent[node]
    return root


@njit(cache=True)
def evicted_neighbours(s: int, sv: np.ndarray, stor: np.ndarray, flat, out: np.ndarray) -> int:
    """Storages adjacent to s through a parent or child tensor that are not material."""
    n = 0
    for ptr, visible in ((S_REV, N_REV), (S_FWD, N_FWD)):
        for j in range(stor[ptr, s], stor[ptr, s] + sv[visible, s]):
            if not sv[MATERIAL, flat[j]]:
                out[n] = flat[j]
                n += 1
    return n


@njit(cache=True)
def class_compute(s, sv, stor, flat, scratch, uf_parent, uf_value) -> int:
    """s's compute plus the value of each distinct class among its evicted neighbours."""
    n = evicted_neighbours(s, sv, stor, flat, scratch)
    total = sv[COMPUTE, s]
    for i in range(n):
        scratch[i] = find(uf_parent, sv[NODE, scratch[i]])
        seen = False
        for j in range(i):
            if scratch[j] == scratch[i]:
                seen = True
                break
        if not seen:
            total += uf_value[scratch[i]]
    return total


@njit(cache=True, inline="always")
def _new_class(s: int, value: int, g: np.ndarray, sv: np.ndarray, uf_parent, uf_value) -> int:
    node = g[N_NODES]
    g[N_NODES] += 1
    uf_parent[node] = node
    uf_value[node] = value
    sv[NODE, s] = node
    return node


# ---------------------------------------------------------------- scores and choice


@njit(cache=True, inline="always")
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
        _count(s, sv),
        budget,
        request,
    )


@njit(cache=True, inline="always")
def _bound(policy, scores, s, clock, params, rank, sv, stor, g, budget, request) -> float:
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


@njit(cache=True, inline="always")
def _count(s: int, sv: np.ndarray) -> int:
    return sv[FWD_COUNT, s] + sv[REV_COUNT, s]


@njit(cache=True, inline="always")
def _owes(s: int, g: np.ndarray, sv: np.ndarray) -> bool:
    # The count first: it stays in cache, and policies without regions never owe.
    return g[N_DUE] != 0 and (sv[FWD_DUE, s] != 0 or sv[REV_DUE, s] != 0)


@njit(cache=True)
def _settle_scored(forward, reverse, s, g, sv, stor, flat, bits, stack) -> None:
    """Settle the regions a policy reads in s's score (MSPS reads the reverse one only).

    Called only for a storage that owes (`_owes`): a call in a scan's loop, even one not
    taken, made scans of every policy several times slower.
    """
    if forward:
        settle(s, True, g, sv, stor, flat, bits, stack)
    if reverse:
        settle(s, False, g, sv, stor, flat, bits, stack)


@njit(cache=True, inline="always")
def _outscored(
    policy, scores, params, rank, s, best, budget, request, g, sv, stor, flat, bits, stack
):
    """Whether s's score exceeds `best` whatever its owed regions hold (`_bound`); else
    settle them. An outscored s is neither the minimum nor zero: its regions can stay owed."""
    if _bound(policy, scores, s, g[CLOCK], params, rank, sv, stor, g, budget, request) > best:
        return True
    settle(s, True, g, sv, stor, flat, bits, stack)
    settle(s, False, g, sv, stor, flat, bits, stack)
    return False


@njit(cache=True, inline="always")
def _scan(
    policy, params, rank, scores, n_locked, request, budget, g, sv, stor, flat, bits, scratch, uf
):
    """simrd's Heuristic.choose: scan the pool in order, keep the last minimum, stop at a zero.

    Storages ranked below `n_locked` are not candidates. Returns the choice (-1 if nothing else
    is in the pool) and the range of locked counts that lock the same storages in this scan:
    above the highest rank it skipped, up to the lowest rank it evaluated. A monotone policy
    skips settling a candidate whose lower bound (`_bound`) already exceeds the best score (it
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
        if _owes(s, g, sv):
            if not monotone:
                _settle_scored(forward, reverse, s, g, sv, stor, flat, bits, scratch)
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


@njit(cache=True)
def choose(rule, request, budget, g, sv, stor, flat, bits, scratch, uf) -> int:
    """The storage the policy evicts. The set's generated `choose` gives each policy its own
    inlined scan (or its kernel-level rule), the policy id a constant there."""
    policy, params, rank, scores = rule
    g[LOCKED] = 0
    return scoring.choose(
        scores, policy, params, rank, request, budget, g, sv, stor, flat, bits, scratch, uf
    )


@njit(cache=True, inline="always")
def _locked_count(alpha, floor, n, mem, budget) -> int:
    """⌈K·N⌉ for K = alpha · residual / budget + floor, in simrd's float arithmetic."""
    residual = max(budget - mem, 0)
    share = alpha * residual / budget if budget > 0 else 0.0
    return math.ceil((share + floor) * n)


@njit(cache=True)
def _choose_uncentral(
    policy, params, rank, scores, request, budget, g, sv, stor, flat, bits, scratch, uf
):
    """TControlInspired: the policy's scan among storages outside the ⌈K·N⌉ most central,
    where K = alpha · residual / budget + floor (its first two parameters); the whole pool
    when all of it is locked."""
    alpha, floor = params[0], params[1]
    n_locked = _locked_count(alpha, floor, len(rank), g[MEM], budget)
    g[LOCKED] = n_locked
    best, low, high = _scan(
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
        best = _scan(
            policy, params, rank, scores, 0, request, budget, g, sv, stor, flat, bits, scratch, uf
        )[0]
    return best


@njit(cache=True)
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


@njit(cache=True)
def _last_alike(alpha, floor, n, mem, inside, outside, low, high) -> int:
    """The budget nearest `outside` whose locked count, like that of `inside`, is in range."""
    while abs(outside - inside) > 1:
        middle = (inside + outside) // 2
        if low <= _locked_count(alpha, floor, n, mem, middle) <= high:
            inside = middle
        else:
            outside = middle
    return inside


@njit(cache=True, inline="always")
def _before(a_cost, a_size, a_root, b_cost, b_size, b_root) -> bool:
    """TwoPhase's order: lower e*/staleness, then larger size, then older root tensor."""
    if a_cost != b_cost:
        return a_cost < b_cost
    if a_size != b_size:
        return a_size > b_size
    return a_root < b_root


@njit(cache=True)
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
            if _owes(s, g, sv):
                _settle_scored(forward, reverse, s, g, sv, stor, flat, bits, stack)
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


@njit(cache=True)
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
        if _owes(c, g, sv):
            _settle_scored(forward, reverse, c, g, sv, stor, flat, bits, stack)
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


@njit(cache=True, inline="always")
def _bigger(a: int, b: int, stor: np.ndarray) -> bool:
    if stor[S_SIZE, a] != stor[S_SIZE, b]:
        return stor[S_SIZE, a] > stor[S_SIZE, b]
    return stor[S_ROOT, a] < stor[S_ROOT, b]


# ---------------------------------------------------------------- evict and compute


@njit(cache=True)
def evict(s, regions, eqclass, g, sv, stor, flat, defined, bits, scratch, uf_parent, uf_value):
    """simrd's RuntimeV2Optimized._evict: free s, grow the regions and classes around it."""
    if regions:
        _settle_bordering(s, g, sv, stor, flat, bits, scratch)
        _unstamp_missed(s, True, g, sv, stor, flat, bits, scratch)
        _unstamp_missed(s, False, g, sv, stor, flat, bits, scratch)
    sv[MATERIAL, s] = 0
    g[MEM] -= stor[S_SIZE, s]
    pool_remove(g, sv, s, stor[S_SIZE, s])
    for k in range(stor[S_TENSORS, s], stor[S_TENSORS, s] + sv[N_TENSORS, s]):
        defined[flat[k]] = 0
    if regions:
        # Regions bordering s take it in (pinned ones are never read, see _rebuild_unpinned).
        for plane, forward in ((REV_FR, True), (FWD_FR, False)):
            n = members(bits, plane, s, scratch)
            for i in range(n):
                if not sv[PINNED, scratch[i]]:
                    absorb(scratch[i], s, forward, g, sv, bits)
        bits[:, s, :] = 0
        sv[FWD_C, s] = sv[REV_C, s] = sv[FWD_COUNT, s] = sv[REV_COUNT, s] = 0
        sv[FWD_EXACT, s] = sv[REV_EXACT, s] = sv[FWD_LAG, s] = 0
    if eqclass:
        # A new class for s, merged with the classes of its evicted neighbours.
        node = _new_class(s, sv[COMPUTE, s], g, sv, uf_parent, uf_value)
        n = evicted_neighbours(s, sv, stor, flat, scratch)
        for i in range(n):
            other = find(uf_parent, sv[NODE, scratch[i]])
            if other != node:
                uf_parent[other] = node
                uf_value[node] += uf_value[other]


@njit(cache=True)
def compute(t, remat, regions, g, sv, ops, tens, stor, flat, defined, bits, scratch, uf):
    """Run t's operator: simrd's RuntimeV2Optimized._compute."""
    op = tens[T_OP, t]
    first, last = ops[OP_OUT, op], ops[OP_OUT, op + 1]
    # Storages that become material, in simrd's order: siblings by index, then t itself.
    fresh = scratch[sv.shape[1] + 1 :]
    n_fresh = 0
    dup_bytes = 0
    for u in range(first, last):
        if u == t:
            continue
        if defined[u]:
            dup_bytes += tens[T_SIZE, u]
        if not sv[MATERIAL, tens[T_STORAGE, u]]:
            fresh[n_fresh] = tens[T_STORAGE, u]
            n_fresh += 1
    if not sv[MATERIAL, tens[T_STORAGE, t]]:
        fresh[n_fresh] = tens[T_STORAGE, t]
        n_fresh += 1
    cost = ops[OP_COST, op]
    g[CLOCK] += cost
    g[MEM] += ops[OP_TOTAL, op]
    g[PEAK] = max(g[PEAK], g[MEM])
    g[REMAT_C if remat else MODEL_C] += cost
    if remat:
        g[REMATS] += 1
    for u in range(first, last):
        if u == t or not defined[u]:
            sv[MATERIAL, tens[T_STORAGE, u]] = 1
            defined[u] = 1
    g[MEM] -= dup_bytes
    for i in range(n_fresh):
        pool_add(g, sv, fresh[i], stor[S_SIZE, fresh[i]])
    if regions and not remat:  # the lagging inputs' regions take in their outputs just below
        for j in range(ops[OP_FWD_GROWTH, op], ops[OP_FWD_GROWTH, op + 1]):
            if sv[FWD_LAG, flat[j]] == op + 1:
                sv[FWD_LAG, flat[j]] = 0
    if regions:
        _rebuild_around(fresh, n_fresh, g, sv, stor, flat, bits, scratch)
    for i in range(n_fresh):
        # A computed storage leaves its class's value, not the class.
        node = sv[NODE, fresh[i]]
        if node >= 0:
            uf[1][find(uf[0], node)] -= sv[COMPUTE, fresh[i]]
            sv[NODE, fresh[i]] = -1


# ---------------------------------------------------------------- events (off unless g[EV_ON])


@njit(cache=True)
def _emit(ev, g, kind, op, a, b, c, d, e, f, x):
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


@njit(cache=True)
def _note_decision(ev, rule, op, request, budget, victim, g, sv, stor, flat, bits, scratch, uf):
    """A decision's event (the chosen storage's score components, then the shortfall) and,
    when the step and the decision are inside the window and the decision is not omitted,
    before it every pool storage's components in pool order (then whether the policy could
    choose it), or the best g[EV_TOP] of them (`_note_best`)."""
    policy, params, rank, scores = rule
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
                rule,
                request,
                budget,
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
                    ev, rule, request, budget, op, decision, s, g, sv, stor, flat, bits, scratch, uf
                )
                ev[g[EV_N] - 1, 9] = rank[s] >= g[LOCKED]
                s = sv[NEXT, s]
    ev = _note_candidate(
        ev, rule, request, budget, op, decision, victim, g, sv, stor, flat, bits, scratch, uf
    )
    ev[g[EV_N] - 1, 0] = EV_DECISION
    ev[g[EV_N] - 1, 9] = g[MEM] + request - budget
    return ev


@njit(cache=True)
def _note_best(
    ev, rule, request, budget, op, decision, victim, g, sv, stor, flat, bits, scratch, uf
):
    """The g[EV_TOP] best candidates the scan evaluated, in pool order, then a ranking event:
    how many it evaluated and the chosen storage's rank among them (0 when not one of them).

    Evaluated: the candidates the policy could choose, in pool order up to the first zero score
    (where a scan stops). Ranked by score, ties to the later one. A thrashing run's window holds
    tens of millions of candidates: a monotone policy's candidate's owed regions are settled
    only once its lower bound (`_bound`) could put it among the best or before the chosen one.
    """
    policy, params, rank, scores = rule
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
    known = (costs, exact, rule, request, budget)
    for i in range(m):
        if monotone and _owes(ids[i], g, sv):
            costs[i] = _bound(
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
                rule,
                request,
                budget,
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
    return _emit(ev, g, EV_RANKING, op, decision, end, place, 0, 0, 0, 0)


@njit(cache=True, inline="always")
def _ranks_before(scores, i, j) -> bool:
    """Whether candidate i ranks before candidate j: a lower score, or an equal one later."""
    return scores[i] < scores[j] or (scores[i] == scores[j] and i > j)


@njit(cache=True)
def _make_exact(i, ids, known, g, sv, stor, flat, bits, scratch, uf):
    """Replace candidate i's bound by its score; `known` = (costs, exact, rule, request, budget)."""
    costs, exact, rule, request, budget = known
    if not exact[i]:
        costs[i] = _settled_score(
            rule, request, budget, ids[i], g, sv, stor, flat, bits, scratch, uf
        )
        exact[i] = True


@njit(cache=True)
def _settled_score(rule, request, budget, s, g, sv, stor, flat, bits, scratch, uf) -> float:
    """s's score once its owed regions are settled."""
    policy, params, rank, scores = rule
    settle(s, True, g, sv, stor, flat, bits, scratch)
    settle(s, False, g, sv, stor, flat, bits, scratch)
    class_value = 0
    if scoring.flags(scores, policy)[3]:
        class_value = class_compute(s, sv, stor, flat, scratch, uf[0], uf[1])
    return score(
        policy, scores, s, g[CLOCK], class_value, params, rank, sv, stor, g, budget, request
    )


@njit(cache=True)
def _note_candidate(
    ev, rule, request, budget, op, decision, s, g, sv, stor, flat, bits, scratch, uf
):
    cost = _settled_score(rule, request, budget, s, g, sv, stor, flat, bits, scratch, uf)
    e_star = sv[COMPUTE, s] + sv[FWD_C, s] + sv[REV_C, s]
    staleness = g[CLOCK] - sv[LAST, s]
    size, count = stor[S_SIZE, s], _count(s, sv)
    return _emit(ev, g, EV_CANDIDATE, op, decision, s, e_star, size, staleness, count, cost)


# ---------------------------------------------------------------- the replay


@njit(cache=True, inline="always")
def _grown(a: np.ndarray, need: int) -> np.ndarray:
    if need <= len(a):
        return a
    b = np.zeros(max(need, 2 * len(a)), a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True)
def _sample_pinned(g: np.ndarray) -> None:
    pinned = g[MEM] - g[POOL_BYTES]
    if pinned > g[PEAK_PINNED]:
        g[PEAK_PINNED] = pinned
        g[PEAK_PINNED_DEPTH] = g[DEPTH]


@njit(cache=True)
def _note_fail(ev, g, status):
    if not g[EV_ON]:
        return ev
    return _emit(
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


@njit(cache=True)
def _fail(g: np.ndarray, op: int, request: int, over: int) -> None:
    g[FAIL_OP] = op
    g[FAIL_REQ] = request
    g[FAIL_PINNED] = g[MEM] - g[POOL_BYTES]
    g[FAIL_DEPTH] = g[DEPTH]
    g[FAIL_OVER] = over


@njit(cache=True)
def _fits(g: np.ndarray, request: int, budget: int) -> bool:
    """simrd's `memory + request > budget` test, narrowing the certified budget interval."""
    need = g[MEM] + request
    if need > budget:
        g[HI] = min(g[HI], need - 1)
        return False
    g[LO] = max(g[LO], need)
    return True


@njit(cache=True)
def _enter(g: np.ndarray, frames: np.ndarray, top: int, t: int, remat: bool) -> int:
    frames[top, 0], frames[top, 1], frames[top, 2] = t, remat, 0
    if remat:
        g[DEPTH] += 1
        g[MAX_DEPTH] = max(g[MAX_DEPTH], g[DEPTH])
    return top + 1


@njit(cache=True)
def _evictable(s: int, sv: np.ndarray) -> bool:
    """The policy contract: a victim is material, unlocked and in the evictable pool."""
    return s >= 0 and sv[IN_POOL, s] and sv[MATERIAL, s] and sv[REF_INT, s] == 0


@njit(cache=True)
def _room_for_class(uf, g: np.ndarray, eqclass: bool, more: int):
    """Classes take one union-find node per new storage and per eviction; grow on demand."""
    if not eqclass:
        return uf
    need = g[N_NODES] + more
    return _grown(uf[0], need), _grown(uf[1], need)


@njit(cache=True)
def materialize(L, st, t0, remat0, budget, rule, remat_limit, regions, eqclass, work, uf):
    """simrd's _materialize as an explicit stack machine (no recursion limit).

    `work` = (frames, snap, log, events). Frame columns: tensor, remat flag, phase, first and
    end index of its snapshot of undefined parents in `snap`, position in that snapshot.
    Returns (status, work, uf), the last two possibly reallocated.
    """
    ops, tens, stor, flat = L.ops, L.tens, L.stor, L.flat
    g, sv, defined, bits, scratch = st
    frames, snap, log, ev = work
    top = _enter(g, frames, 0, t0, remat0)
    if remat0 and g[EV_ON]:
        ev = _emit(ev, g, EV_REMAT, tens[T_OP, t0], t0, tens[T_STORAGE, t0], g[DEPTH], 0, 0, 0, 0)
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
                    ev = _emit(
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
                ev = _emit(ev, g, EV_ALLOC, op, request, g[MEM], pinned, g[DEPTH], short, remat, 0)
            while not _fits(g, request, budget):
                # An empty pool, or one holding only retained storages: nothing to evict.
                victim = -1
                if g[POOL_HEAD] >= 0:
                    victim = choose(rule, request, budget, g, sv, stor, flat, bits, scratch, uf)
                if victim < 0:
                    _fail(g, op, request, g[MEM] + request - budget)
                    return OOM, (frames, snap, log, _note_fail(ev, g, OOM)), uf
                if not _evictable(victim, sv):
                    return INVALID_CHOICE, (frames, snap, log, ev), uf
                if g[EV_ON]:
                    ev = _note_decision(
                        ev, rule, op, request, budget, victim, g, sv, stor, flat, bits, scratch, uf
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
                    ev = _emit(ev, g, EV_EVICT, op, g[N_EVICTED] - 1, victim, size, g[MEM], 0, 0, 0)
            compute(t, remat, regions, g, sv, ops, tens, stor, flat, defined, bits, scratch, uf)
            for j in range(a0, a1):
                unlock(g, sv, stor, tens[T_STORAGE, flat[j]])
            if remat and g[EV_ON]:
                ev = _emit(ev, g, EV_REBUILT, op, t, tens[T_STORAGE, t], g[DEPTH], 0, 0, 0, 0)
            if g[REMAT_C] > remat_limit:
                _fail(g, op, request, g[MEM] - budget)
                return THRASHED, (frames, snap, log, _note_fail(ev, g, THRASHED)), uf
            top -= 1
            snap_top = frames[k, 3]
            if frames[k, 1]:
                g[DEPTH] -= 1
    return RUNNING, (frames, snap, log, ev), uf


@njit(cache=True, inline="always")
def _touch(s: int, forward_only: bool, g: np.ndarray, sv: np.ndarray) -> None:
    """s gains an edge or compute: its regions are no longer known exact, nor, while s is
    not material, any region holding it (see _exact). A forward edge leaves s's reverse region
    exact: a rebuild of it follows reverse edges only. (Most eager frees compared that region
    with its rebuild for nothing, see _unstamp_missed.)"""
    sv[FWD_EXACT, s] = 0
    if not forward_only:
        sv[REV_EXACT, s] = 0
    if not sv[MATERIAL, s]:
        g[EXACT] += 1


@njit(cache=True)
def _unstamp_holders(s: int, sv: np.ndarray, bits: np.ndarray) -> None:
    """s, not material, gains a forward edge to a new storage: the forward regions holding s
    lose their stamps, a rebuild would take in the new storage too. No other region's rebuild
    changes: the new storage has no edges of its own. (Nothing is owed when outputs are
    created, see _settle_all, so every region's interior row is its rebuild's.)"""
    word, bit = s >> 6, _U1 << np.uint64(s & 63)
    for x in range(bits.shape[1]):
        if bits[FWD_INT, x, word] & bit:
            sv[FWD_EXACT, x] = 0


@njit(cache=True)
def _create_outputs(op, regions, eqclass, g, sv, ops, tens, flat, bits, uf) -> None:
    """Register op's outputs on their storages and as neighbours of its arguments' storages.

    Under classes, a new storage starts in a class of its own with value 0: until computed it
    counts as an evicted neighbour, as in simrd, and its first computation debits that class.
    """
    new, material = True, True
    for j in range(ops[OP_FWD_GROWTH, op], ops[OP_FWD_GROWTH, op + 1]):
        material = material and sv[MATERIAL, flat[j]] != 0
    for t in range(ops[OP_OUT, op], ops[OP_OUT, op + 1]):
        s = tens[T_STORAGE, t]
        if eqclass and sv[N_TENSORS, s] == 0:
            _new_class(s, 0, g, sv, uf[0], uf[1])
        if sv[N_TENSORS, s]:
            _touch(s, False, g, sv)  # a new storage is in no region and its own are rebuilt
            new = False
        sv[N_TENSORS, s] += 1
        sv[COMPUTE, s] += tens[T_GAIN, t]
        sv[REF_EXT, s] += 1
    for j in range(ops[OP_FWD_GROWTH, op], ops[OP_FWD_GROWTH, op + 1]):
        p = flat[j]
        sv[N_FWD, p] += 1
        if not new:
            _touch(p, True, g, sv)
        elif material and _lags(p, op, g, sv):  # every input is material
            sv[FWD_LAG, p] = op + 1
        elif sv[MATERIAL, p]:
            sv[FWD_EXACT, p] = 0
        elif regions:
            _unstamp_holders(p, sv, bits)
    for j in range(ops[OP_REV_GROWTH, op], ops[OP_REV_GROWTH, op + 1]):
        sv[N_REV, flat[j]] += 1  # an output's storage: touched above unless new


def new_work(L: Layout, st: State, eqclass: bool):
    """A replay's growing arrays besides its state: `work` = (frames, snap, eviction log,
    events) and the union-find of equivalence classes `uf` = (parents, values)."""
    work = (
        np.zeros((L.tens.shape[1] + 1, 6), np.int64),
        np.zeros(len(L.flat) + 1, np.int64),
        np.zeros(1024, np.int64),
        np.zeros((1024 if st.g[EV_ON] else 0, EV_COLS)),
    )
    n_nodes = 2 * st.sv.shape[1] + 16 if eqclass else 1
    return work, (np.zeros(n_nodes, np.int64), np.zeros(n_nodes, np.int64))


@njit(cache=True)
def replay(
    L: Layout, st: State, work, uf, budget, rule, scores, remat_limit, regions, eqclass, start, end
):
    """Replay schedule commands `start`..`end - 1`; returns (status, work, uf), the last two
    possibly reallocated: RUNNING when every command ran, with counters in st.g.

    Between commands no rematerialization is in progress (frames and snap are empty), so
    (st, the eviction log, uf) after command i is the whole state a replay continues from.
    `rule` = (policy id, float64 parameters in the policy's order, int64 rank of each storage:
    centrality for TControlInspired, 0 = most central; below 0 = retained, never a candidate),
    `scores` the compiled score set holding the policy id (scoring.ScoreSet; apart from
    `rule`, which numba then types on its fast path at every call).
    Events are recorded when g[EV_ON] is set, with candidates at steps (the operators the
    schedule runs, rematerializations aside) g[EV_FIRST_STEP] to g[EV_LAST_STEP], of the
    decisions numbered g[EV_FIRST_DECISION] to g[EV_LAST_DECISION] among them, except those
    numbered g[EV_OMIT_FIRST] to g[EV_OMIT_LAST].
    """
    L, st, rule = _views(L, st, rule, scores)
    ops, tens, stor, flat, cmds = L
    g, sv, defined, bits, scratch = st
    status = RUNNING
    for i in range(start, end):
        kind, arg = cmds[0, i], cmds[1, i]
        if kind == COMPUTE_CMD:
            first, last = ops[OP_OUT, arg], ops[OP_OUT, arg + 1]
            g[STEP] = arg
            uf = _room_for_class(uf, g, eqclass, last - first)
            _settle_all(g, sv, stor, flat, bits, scratch)
            _create_outputs(arg, regions, eqclass, g, sv, ops, tens, flat, bits, uf)
            status, work, uf = materialize(
                L, st, first, False, budget, rule, remat_limit, regions, eqclass, work, uf
            )
            for t in range(first, last):
                sv[LAST, tens[T_STORAGE, t]] = g[CLOCK]
        elif kind == GET_CMD:
            sv[REF_EXT, tens[T_STORAGE, arg]] += 1
        elif kind == PIN_CMD:
            s = tens[T_STORAGE, arg]
            if not defined[arg]:
                status, work, uf = materialize(
                    L, st, arg, True, budget, rule, remat_limit, regions, eqclass, work, uf
                )
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
                    ev = _emit(work[3], g, EV_FREE, g[STEP], i, s, stor[S_SIZE, s], g[MEM], 0, 0, 0)
                    work = (work[0], work[1], work[2], ev)
        if status != RUNNING:
            break
    return status, work, uf
