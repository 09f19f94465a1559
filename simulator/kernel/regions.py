"""Evicted neighbourhoods (regions): rebuilt, absorbed at evictions, owed and settled."""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.kernel.bitsets import U1, has_bit, low_bit, set_bit
from simulator.kernel.state import (
    COMPUTE,
    DUE_LIST,
    EXACT,
    FWD_C,
    FWD_COUNT,
    FWD_DUE,
    FWD_EXACT,
    FWD_FR,
    FWD_INT,
    FWD_LAG,
    LISTED,
    MATERIAL,
    N_DUE,
    N_FWD,
    N_LISTED,
    N_REV,
    PINNED,
    REV_C,
    REV_COUNT,
    REV_DUE,
    REV_EXACT,
    REV_FR,
    REV_INT,
)
from simulator.layout import S_FWD, S_REV


@njit
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
                    set_bit(bits, frontier, base, u)
            elif not has_bit(bits, interior, base, u):
                compute += sv[COMPUTE, u]
                count += 1
                set_bit(bits, interior, base, u)
                stack[top] = u
                top += 1
    sv[FWD_C if forward else REV_C, base] = compute
    sv[FWD_COUNT if forward else REV_COUNT, base] = count
    sv[FWD_EXACT if forward else REV_EXACT, base] = g[EXACT]
    if forward:
        sv[FWD_LAG, base] = 0


@njit
def absorb(p: int, s: int, forward: bool, g: np.ndarray, sv: np.ndarray, bits: np.ndarray) -> None:
    """p's region takes in just-evicted s (on its frontier) together with s's own region.

    The union is what a rebuild would find when both regions were exact (see is_exact), and
    when p's lags (see lags) what it would find without the pending outputs.
    """
    interior, frontier = (FWD_INT, FWD_FR) if forward else (REV_INT, REV_FR)
    bits[frontier, p, s >> 6] &= ~(U1 << np.uint64(s & 63))
    added = 0
    count = 0
    for w in range(bits.shape[2]):
        bits[frontier, p, w] |= bits[frontier, s, w]
        fresh = bits[interior, s, w] & ~bits[interior, p, w]
        if w == s >> 6:
            fresh |= U1 << np.uint64(s & 63)  # s joins the interior, counted even if present
        bits[interior, p, w] |= fresh
        while fresh:
            added += sv[COMPUTE, w * 64 + low_bit(fresh)]
            count += 1
            fresh &= fresh - U1
    sv[FWD_C if forward else REV_C, p] += added
    sv[FWD_COUNT if forward else REV_COUNT, p] += count
    exact = FWD_EXACT if forward else REV_EXACT
    if sv[exact, s] != g[EXACT] or has_bit(bits, frontier, p, p):
        sv[exact, p] = 0  # (a rebuild never puts p on its own frontier, a cycle through s can)


@njit(inline="always")
def owe(base, forward, g, sv) -> None:
    """Mark base's region as owing the rebuild simrd does here; `settle` runs it later.

    Most of these rebuilds are overwritten by another before anything reads them, and they
    were most of the time of thrashing runs. A region is read only when its storage is scored,
    evicted or absorbs an eviction, and it is settled just before. Rebuilt then, it gets the
    value simrd's rebuild got: in between, nothing changed what a rebuild from scratch finds.
    An eviction on its frontier would have made it absorb (a read); a computed storage of its
    interior makes it owed again; the graph and the compute values change only in
    `create_outputs`, before which every owed region is settled.
    """
    due = FWD_DUE if forward else REV_DUE
    if not sv[due, base]:
        sv[due, base] = 1
        g[N_DUE] += 1
        if not sv[LISTED, base]:
            sv[LISTED, base] = 1
            sv[DUE_LIST, g[N_LISTED]] = base
            g[N_LISTED] += 1


@njit(inline="always")
def lags(p, op, g, sv) -> bool:
    """Whether material p's forward region, gaining edges to op's outputs, can lag behind them
    instead of losing its stamp: op's outputs are new storages (none of its tensors on an
    existing one), its inputs are all material, and p is unpinned, its region exact or
    already lagging behind op (nothing is owed when outputs are created, see settle_all).

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


@njit(inline="always")
def is_exact(base, forward, g, sv) -> bool:
    """Whether base's region is known to equal its rebuild from scratch.

    simrd rebuilds some regions from scratch and keeps the others up to date, which can drift
    from a rebuild (a new operator's edges, a cycle through an alias). A rebuild stamps the
    region with g[EXACT]; a region whose storage gains compute or an edge it follows loses its
    stamp (`_touch`); an absorb keeps it when both regions had it, and so does `_shrink`; an
    eviction that simrd's drifted frontiers hide from a region takes its stamp
    (`unstamp_missed`). A new stamp makes every region unknown: taken when a storage that is
    not material gains an edge or compute (nothing lists the regions holding it), unless the
    edge leads to a new storage (then `_unstamp_holders` finds the regions it changes). An owed
    forward region whose stamp is g[EXACT] is not exact, but its frontier row holds every
    storage of its rebuild's frontier (see `_ahead`). A lagging forward region (see lags)
    is stamped but not exact.
    """
    return (
        not sv[FWD_DUE if forward else REV_DUE, base]
        and sv[FWD_EXACT if forward else REV_EXACT, base] == g[EXACT]
        and not (forward and sv[FWD_LAG, base])
    )


@njit
def unstamp_missed(base, forward, g, sv, stor, flat, bits, stack) -> None:
    """base is about to be evicted: if its region is not known exact, compare it with its
    rebuild. If it drifted, simrd keeps and absorbs the drifted value, so base's stamp stays
    lost (and with it the stamps of the regions absorbing it, see absorb), and the regions on
    the rebuilt frontier but not on the kept one lose theirs: from scratch they take base in,
    but no absorb tells them."""
    if is_exact(base, forward, g, sv):
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
            sv[missed, w * 64 + low_bit(word)] = 0
            word &= word - U1
    bits[interior, base, :] = kept_interior
    bits[frontier, base, :] = kept_frontier
    sv[count, base], sv[compute, base] = kept_count, kept_compute
    sv[FWD_EXACT if forward else REV_EXACT, base] = 0


@njit(inline="always")
def settle(base, forward, g, sv, stor, flat, bits, stack) -> None:
    """Rebuild base's region if a rebuild is owed (see owe)."""
    due = FWD_DUE if forward else REV_DUE
    if sv[due, base]:
        sv[due, base] = 0
        g[N_DUE] -= 1
        rebuild(base, forward, g, sv, stor, flat, bits, stack)


@njit
def _settle_listed(bases, forward, g, sv, stor, flat, bits, stack) -> None:
    for w in range(len(bases)):
        word = bases[w]
        while word:
            settle(w * 64 + low_bit(word), forward, g, sv, stor, flat, bits, stack)
            word &= word - U1


@njit
def settle_all(g, sv, stor, flat, bits, stack) -> None:
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


@njit
def settle_bordering(s, g, sv, stor, flat, bits, stack) -> None:
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
            if has_bit(bits, REV_FR, s, p):
                settle(p, True, g, sv, stor, flat, bits, stack)
            if has_bit(bits, FWD_FR, s, p):
                settle(p, False, g, sv, stor, flat, bits, stack)
    else:
        _settle_listed(bits[REV_FR, s, :], True, g, sv, stor, flat, bits, stack)
        _settle_listed(bits[FWD_FR, s, :], False, g, sv, stor, flat, bits, stack)
