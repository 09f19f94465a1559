"""Regions around storages that just became material: shrunk, owed, or looked ahead."""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.kernel.bitsets import U1, clear_bit, has_bit, low_bit, set_bit
from simulator.kernel.regions import is_exact, owe, rebuild
from simulator.kernel.state import (
    COMPUTE,
    EXACT,
    FWD_C,
    FWD_COUNT,
    FWD_DUE,
    FWD_EXACT,
    FWD_FR,
    FWD_INT,
    MATERIAL,
    N_FWD,
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
def rebuild_around(fresh, n_fresh, g, sv, stor, flat, bits, stack) -> None:
    """Rebuild the regions of new material storages; the regions that held them shrink to
    their rebuild (`_shrink`) or owe it (`owe`). Pinned storages' regions are never read (a
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
        owe(fresh[0], True, g, sv)
    else:
        for i in range(n_fresh):
            rebuild(fresh[i], True, g, sv, stor, flat, bits, stack)
            affected_rev |= bits[FWD_FR, fresh[i], :]
    for forward, bases in ((True, affected), (False, affected_rev)):
        for w in range(len(bases)):
            word = bases[w]
            while word:
                base = w * 64 + low_bit(word)
                if not sv[PINNED, base] and not _shrink(
                    base, forward, fresh, n_fresh, g, sv, stor, flat, bits
                ):
                    if forward:  # its rebuild's frontier may now hold the fresh storages
                        for i in range(n_fresh):
                            set_bit(bits, FWD_FR, base, fresh[i])
                    owe(base, forward, g, sv)
                word &= word - U1


@njit
def _ahead(s, g, sv, stor, flat, bits, out) -> bool:
    """Put into `out` the storages on just-computed s's forward frontier (its rebuild's) whose
    reverse regions are read (not pinned, not owed), from those regions instead: s is in one's
    interior iff it is on s's frontier, when that region is exact (see is_exact). Candidates:
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
            p = w * 64 + low_bit(word)
            if not sv[PINNED, p] and sv[FWD_EXACT, p] == g[EXACT]:
                behind = p
            word &= word - U1
        if behind >= 0:
            break
    if behind < 0 or (not sv[FWD_DUE, behind] and sv[FWD_COUNT, behind] < bits.shape[2]):
        return False
    for write in (False, True):
        for w in range(bits.shape[2]):
            word = bits[FWD_FR, behind, w]
            if w == behind >> 6:
                word |= U1 << np.uint64(behind & 63)  # a cycle through an alias can lead back
            while word:
                x = w * 64 + low_bit(word)
                if x != s and sv[MATERIAL, x] and not sv[PINNED, x]:
                    unknown = sv[REV_DUE, x] != 0
                    if not unknown and sv[REV_EXACT, x] != g[EXACT]:
                        return False
                    if write and (unknown or has_bit(bits, REV_INT, x, s)):
                        set_bit(bits, FWD_FR, s, x)  # (the row of a storage not material is 0)
                        if not unknown:
                            out[w] |= U1 << np.uint64(x & 63)
                word &= word - U1
    sv[FWD_EXACT, s] = g[EXACT]
    return True


@njit
def _shrink(base, forward, fresh, n_fresh, g, sv, stor, flat, bits) -> bool:
    """Give base's exact region the value its rebuild would find now that `fresh` are
    material, when each fresh storage of its interior has an empty region in that direction
    (then nothing else was reached through it); False, changing nothing, otherwise.

    The interior loses those storages, each fresh storage and each of their (material)
    neighbours is on the frontier iff base or a remaining interior storage leads to it; other
    frontier storages keep what led to them.
    """
    if not is_exact(base, forward, g, sv):
        return False
    interior = FWD_INT if forward else REV_INT
    count, compute = (FWD_COUNT, FWD_C) if forward else (REV_COUNT, REV_C)
    ptr, visible = (S_FWD, N_FWD) if forward else (S_REV, N_REV)
    due = FWD_DUE if forward else REV_DUE  # a fresh storage's owed region is not empty
    for i in range(n_fresh):
        if has_bit(bits, interior, base, fresh[i]) and (sv[count, fresh[i]] or sv[due, fresh[i]]):
            return False
    for i in range(n_fresh):
        r = fresh[i]
        if has_bit(bits, interior, base, r):
            clear_bit(bits, interior, base, r)
            sv[compute, base] -= sv[COMPUTE, r]
            sv[count, base] -= 1
    for i in range(n_fresh):
        r = fresh[i]
        _support(r, base, forward, sv, stor, flat, bits)
        for j in range(stor[ptr, r], stor[ptr, r] + sv[visible, r]):
            if sv[MATERIAL, flat[j]]:
                _support(flat[j], base, forward, sv, stor, flat, bits)
    return True


@njit(inline="always")
def _support(x, base, forward, sv, stor, flat, bits) -> None:
    """Put material x on base's frontier iff base or a storage of its interior leads to x."""
    interior, frontier = (FWD_INT, FWD_FR) if forward else (REV_INT, REV_FR)
    ptr, visible = (S_REV, N_REV) if forward else (S_FWD, N_FWD)  # who leads to x
    if x == base:
        return
    for j in range(stor[ptr, x], stor[ptr, x] + sv[visible, x]):
        z = flat[j]
        if z == base or has_bit(bits, interior, base, z):
            set_bit(bits, frontier, base, x)
            return
    clear_bit(bits, frontier, base, x)
