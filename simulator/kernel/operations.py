"""simrd's state changes: evict a storage, compute an operator, register its outputs."""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.kernel.bitsets import U1, members
from simulator.kernel.classes import evicted_neighbours, find, new_class
from simulator.kernel.pool import pool_add, pool_remove
from simulator.kernel.refresh import rebuild_around
from simulator.kernel.regions import absorb, lags, settle_bordering, unstamp_missed
from simulator.kernel.state import (
    CLOCK,
    COMPUTE,
    EXACT,
    FWD_C,
    FWD_COUNT,
    FWD_EXACT,
    FWD_FR,
    FWD_INT,
    FWD_LAG,
    MATERIAL,
    MEM,
    MODEL_C,
    N_FWD,
    N_REV,
    N_TENSORS,
    NODE,
    PEAK,
    PINNED,
    REF_EXT,
    REMAT_C,
    REMATS,
    REV_C,
    REV_COUNT,
    REV_EXACT,
    REV_FR,
)
from simulator.layout import (
    OP_COST,
    OP_FWD_GROWTH,
    OP_OUT,
    OP_REV_GROWTH,
    OP_TOTAL,
    S_SIZE,
    S_TENSORS,
    T_GAIN,
    T_OP,
    T_SIZE,
    T_STORAGE,
)


@njit
def evict(s, regions, eqclass, g, sv, stor, flat, defined, bits, scratch, uf_parent, uf_value):
    """simrd's RuntimeV2Optimized._evict: free s, grow the regions and classes around it."""
    if regions:
        settle_bordering(s, g, sv, stor, flat, bits, scratch)
        unstamp_missed(s, True, g, sv, stor, flat, bits, scratch)
        unstamp_missed(s, False, g, sv, stor, flat, bits, scratch)
    sv[MATERIAL, s] = 0
    g[MEM] -= stor[S_SIZE, s]
    pool_remove(g, sv, s, stor[S_SIZE, s])
    for k in range(stor[S_TENSORS, s], stor[S_TENSORS, s] + sv[N_TENSORS, s]):
        defined[flat[k]] = 0
    if regions:
        # Regions bordering s take it in (pinned ones are never read, see rebuild_around).
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
        node = new_class(s, sv[COMPUTE, s], g, sv, uf_parent, uf_value)
        n = evicted_neighbours(s, sv, stor, flat, scratch)
        for i in range(n):
            other = find(uf_parent, sv[NODE, scratch[i]])
            if other != node:
                uf_parent[other] = node
                uf_value[node] += uf_value[other]


@njit
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
        rebuild_around(fresh, n_fresh, g, sv, stor, flat, bits, scratch)
    for i in range(n_fresh):
        # A computed storage leaves its class's value, not the class.
        node = sv[NODE, fresh[i]]
        if node >= 0:
            uf[1][find(uf[0], node)] -= sv[COMPUTE, fresh[i]]
            sv[NODE, fresh[i]] = -1


@njit
def create_outputs(op, regions, eqclass, g, sv, ops, tens, flat, bits, uf) -> None:
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
            new_class(s, 0, g, sv, uf[0], uf[1])
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
        elif material and lags(p, op, g, sv):  # every input is material
            sv[FWD_LAG, p] = op + 1
        elif sv[MATERIAL, p]:
            sv[FWD_EXACT, p] = 0
        elif regions:
            _unstamp_holders(p, sv, bits)
    for j in range(ops[OP_REV_GROWTH, op], ops[OP_REV_GROWTH, op + 1]):
        sv[N_REV, flat[j]] += 1  # an output's storage: touched above unless new


@njit(inline="always")
def _touch(s: int, forward_only: bool, g: np.ndarray, sv: np.ndarray) -> None:
    """s gains an edge or compute: its regions are no longer known exact, nor, while s is
    not material, any region holding it (see is_exact). A forward edge leaves s's reverse region
    exact: a rebuild of it follows reverse edges only. (Most eager frees compared that region
    with its rebuild for nothing, see unstamp_missed.)"""
    sv[FWD_EXACT, s] = 0
    if not forward_only:
        sv[REV_EXACT, s] = 0
    if not sv[MATERIAL, s]:
        g[EXACT] += 1


@njit
def _unstamp_holders(s: int, sv: np.ndarray, bits: np.ndarray) -> None:
    """s, not material, gains a forward edge to a new storage: the forward regions holding s
    lose their stamps, a rebuild would take in the new storage too. No other region's rebuild
    changes: the new storage has no edges of its own. (Nothing is owed when outputs are
    created, see settle_all, so every region's interior row is its rebuild's.)"""
    word, bit = s >> 6, U1 << np.uint64(s & 63)
    for x in range(bits.shape[1]):
        if bits[FWD_INT, x, word] & bit:
            sv[FWD_EXACT, x] = 0
