"""The compiled replay loop: simrd's RuntimeV2EagerOptimized decisions, step for step, on arrays.

Everything mutable lives in a `State` of arrays; scalars live in `state.g`, indexed by the
constants below. Regions (evicted neighbourhoods) are bitsets over storages, maintained
incrementally exactly where simrd absorbs and rebuilds them, so the region compute values,
and with them every score, equal simrd's.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from simulator.exactdiv import divide, divide_product
from simulator.layout import Layout

# Scalars in state.g
MEM, CLOCK, MODEL_C, REMAT_C, PEAK = 0, 1, 2, 3, 4
EVALS, EVICTIONS, EAGER, REMATS, DEPTH, MAX_DEPTH = 5, 6, 7, 8, 9, 10
PEAK_PINNED, PEAK_PINNED_DEPTH, POOL_HEAD, POOL_TAIL, POOL_BYTES = 11, 12, 13, 14, 15
LO, HI, FAIL_OP, FAIL_REQ, FAIL_PINNED, FAIL_DEPTH, FAIL_OVER = 16, 17, 18, 19, 20, 21, 22
N_NODES, N_EVICTED = 23, 24
N_SCALARS = 25

RUNNING, DONE, OOM, THRASHED = 0, 1, 2, 3
NO_LIMIT = np.int64(2**62)

# Policy ids, one score rule each (see policies.py for names and parameters)
DTR, DTR_EQCLASS, DTR_LOCAL, MSPS, LRU, LARGEST_STORAGE = 0, 1, 2, 3, 4, 5

_U1 = np.uint64(1)
_U63 = np.uint64(63)

State = namedtuple(
    "State",
    [
        "g",
        "t_defined",
        "s_material",
        "s_ref_int",
        "s_ref_ext",
        "s_pinned",
        "s_last_access",
        "s_compute",
        "st_n",  # tensors of each storage created so far
        "fwd_n",  # entries of each storage's forward / reverse neighbour list created so far
        "rev_n",
        "pool_next",
        "pool_prev",
        "in_pool",
        "fwd_int",  # bitsets [storage, word]: interior / frontier of forward and reverse regions
        "fwd_fr",
        "rev_int",
        "rev_fr",
        "fwd_comp",
        "rev_comp",
        "s_node",  # union-find node of an evicted storage's equivalence class, or -1
        "stack",  # scratch: DFS stack, neighbour roots
    ],
)


def new_state(layout: Layout, regions: bool) -> State:
    """Fresh state for one replay; region bitsets only when the policy reads regions."""
    n_s, n_t = len(layout.s_size), len(layout.t_size)
    words = (n_s + 63) // 64 if regions else 1
    rows = n_s if regions else 1
    g = np.zeros(N_SCALARS, dtype=np.int64)
    g[CLOCK], g[POOL_HEAD], g[POOL_TAIL], g[HI], g[FAIL_OP] = 1, -1, -1, NO_LIMIT, -1
    return State(
        g=g,
        t_defined=np.zeros(n_t, np.uint8),
        s_material=np.zeros(n_s, np.uint8),
        s_ref_int=np.zeros(n_s, np.int32),
        s_ref_ext=np.zeros(n_s, np.int32),
        s_pinned=np.zeros(n_s, np.uint8),
        s_last_access=np.zeros(n_s, np.int64),
        s_compute=np.zeros(n_s, np.int64),
        st_n=np.zeros(n_s, np.int32),
        fwd_n=np.zeros(n_s, np.int32),
        rev_n=np.zeros(n_s, np.int32),
        pool_next=np.full(n_s, -1, np.int32),
        pool_prev=np.full(n_s, -1, np.int32),
        in_pool=np.zeros(n_s, np.uint8),
        fwd_int=np.zeros((rows, words), np.uint64),
        fwd_fr=np.zeros((rows, words), np.uint64),
        rev_int=np.zeros((rows, words), np.uint64),
        rev_fr=np.zeros((rows, words), np.uint64),
        fwd_comp=np.zeros(n_s, np.int64),
        rev_comp=np.zeros(n_s, np.int64),
        s_node=np.full(n_s, -1, np.int64),
        stack=np.zeros(n_s + 1, np.int32),
    )


# ---------------------------------------------------------------- pool (insertion-ordered set)


@njit(cache=True, inline="always")
def pool_add(st: State, s: int, size: int) -> None:
    if st.in_pool[s]:
        return
    tail = st.g[POOL_TAIL]
    st.pool_prev[s], st.pool_next[s] = tail, -1
    if tail >= 0:
        st.pool_next[tail] = s
    else:
        st.g[POOL_HEAD] = s
    st.g[POOL_TAIL] = s
    st.in_pool[s] = 1
    st.g[POOL_BYTES] += size


@njit(cache=True, inline="always")
def pool_remove(st: State, s: int, size: int) -> None:
    if not st.in_pool[s]:
        return
    prev, nxt = st.pool_prev[s], st.pool_next[s]
    if prev >= 0:
        st.pool_next[prev] = nxt
    else:
        st.g[POOL_HEAD] = nxt
    if nxt >= 0:
        st.pool_prev[nxt] = prev
    else:
        st.g[POOL_TAIL] = prev
    st.in_pool[s] = 0
    st.g[POOL_BYTES] -= size


@njit(cache=True, inline="always")
def lock(L: Layout, st: State, s: int) -> None:
    if st.s_ref_int[s] == 0:
        pool_remove(st, s, L.s_size[s])
    st.s_ref_int[s] += 1


@njit(cache=True, inline="always")
def unlock(L: Layout, st: State, s: int) -> None:
    st.s_ref_int[s] -= 1
    if st.s_ref_int[s] == 0:
        pool_add(st, s, L.s_size[s])


# ---------------------------------------------------------------- bitsets


@njit(cache=True, inline="always")
def _has(bits: np.ndarray, row: int, i: int) -> bool:
    return (bits[row, i >> 6] >> np.uint64(i & 63)) & _U1 != 0


@njit(cache=True, inline="always")
def _set(bits: np.ndarray, row: int, i: int) -> None:
    bits[row, i >> 6] |= _U1 << np.uint64(i & 63)


@njit(cache=True, inline="always")
def _clear(bits: np.ndarray, row: int, i: int) -> None:
    bits[row, i >> 6] &= ~(_U1 << np.uint64(i & 63))


_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_SHIFT = np.uint64(58)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * int(_DEBRUIJN) % 2**64) >> 58] = _i


@njit(cache=True, inline="always")
def _low_bit(word: np.uint64) -> int:
    """Index of the lowest set bit (word != 0), by de Bruijn multiplication."""
    return _DEBRUIJN_INDEX[((word & (~word + _U1)) * _DEBRUIJN) >> _DEBRUIJN_SHIFT]


@njit(cache=True)
def members(bits: np.ndarray, row: int, out: np.ndarray) -> int:
    """Write the set bits of one row into `out`, ascending; return how many."""
    n = 0
    for w in range(bits.shape[1]):
        word = bits[row, w]
        while word:
            out[n] = w * 64 + _low_bit(word)
            n += 1
            word &= word - _U1
    return n


# ---------------------------------------------------------------- regions


@njit(cache=True)
def _search(base, ptr, nbrs, visible, material, s_compute, interior, frontier, stack) -> int:
    """Depth-first search through evicted storages; returns the compute of those reached."""
    compute = 0
    stack[0] = base
    top = 1
    while top:
        top -= 1
        s = stack[top]
        for j in range(ptr[s], ptr[s] + visible[s]):
            u = nbrs[j]
            if material[u]:
                if u != base:
                    _set(frontier, base, u)
            elif not _has(interior, base, u):
                compute += s_compute[u]
                _set(interior, base, u)
                stack[top] = u
                top += 1
    return compute


@njit(cache=True)
def rebuild(L: Layout, st: State, base: int, forward: bool) -> None:
    """Recompute base's region from scratch: evicted storages reachable until material ones."""
    interior = st.fwd_int if forward else st.rev_int
    frontier = st.fwd_fr if forward else st.rev_fr
    interior[base, :] = 0
    frontier[base, :] = 0
    if forward:
        compute = _search(
            base,
            L.fwd_ptr,
            L.fwd_list,
            st.fwd_n,
            st.s_material,
            st.s_compute,
            st.fwd_int,
            st.fwd_fr,
            st.stack,
        )
    else:
        compute = _search(
            base,
            L.rev_ptr,
            L.rev_list,
            st.rev_n,
            st.s_material,
            st.s_compute,
            st.rev_int,
            st.rev_fr,
            st.stack,
        )
    if forward:
        st.fwd_comp[base] = compute
    else:
        st.rev_comp[base] = compute


@njit(cache=True)
def absorb(st: State, p: int, s: int, forward: bool) -> None:
    """p's region takes in just-evicted s (on its frontier) together with s's own region."""
    interior = st.fwd_int if forward else st.rev_int
    frontier = st.fwd_fr if forward else st.rev_fr
    _clear(frontier, p, s)
    added = 0
    for w in range(interior.shape[1]):
        frontier[p, w] |= frontier[s, w]
        fresh = interior[s, w] & ~interior[p, w]
        if w == s >> 6:
            fresh |= _U1 << np.uint64(s & 63)  # s joins the interior, counted even if present
        interior[p, w] |= fresh
        while fresh:
            added += st.s_compute[w * 64 + _low_bit(fresh)]
            fresh &= fresh - _U1
    if forward:
        st.fwd_comp[p] += added
    else:
        st.rev_comp[p] += added


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
def evicted_neighbour_storages(L: Layout, st: State, s: int, out: np.ndarray) -> int:
    """Evicted storages adjacent to s through a parent or child tensor (repeats possible)."""
    n = 0
    for j in range(L.rev_ptr[s], L.rev_ptr[s] + st.rev_n[s]):
        if not st.s_material[L.rev_list[j]]:
            out[n] = L.rev_list[j]
            n += 1
    for j in range(L.fwd_ptr[s], L.fwd_ptr[s] + st.fwd_n[s]):
        if not st.s_material[L.fwd_list[j]]:
            out[n] = L.fwd_list[j]
            n += 1
    return n


@njit(cache=True)
def class_compute(L: Layout, st: State, s: int, uf_parent: np.ndarray, uf_value: np.ndarray) -> int:
    """s's compute plus the value of each distinct class among its evicted neighbours."""
    n = evicted_neighbour_storages(L, st, s, st.stack)
    total = st.s_compute[s]
    for i in range(n):
        st.stack[i] = find(uf_parent, st.s_node[st.stack[i]])
        seen = False
        for j in range(i):
            if st.stack[j] == st.stack[i]:
                seen = True
                break
        if not seen:
            total += uf_value[st.stack[i]]
    return total


# ---------------------------------------------------------------- scores and choice
#
# The scan loops take plain arrays: passing the Layout or State tuples inside a loop makes
# Numba reference-count every array they hold at each step.


@njit(cache=True, inline="always")
def _over_size_staleness(numerator: int, size: int, staleness: int) -> float:
    return divide_product(numerator, size, staleness) if size > 0 and staleness > 0 else math.inf


@njit(cache=True, inline="always")
def score(policy, s, clock, e_star_extra, size, compute, fwd_comp, rev_comp, last_access) -> float:
    """The cost simrd's heuristic `policy` gives storage s (`e_star_extra`: class values)."""
    staleness = clock - last_access[s]
    if policy == DTR:
        return _over_size_staleness(compute[s] + fwd_comp[s] + rev_comp[s], size[s], staleness)
    if policy == DTR_EQCLASS:
        return _over_size_staleness(compute[s] + e_star_extra, size[s], staleness)
    if policy == DTR_LOCAL:
        return _over_size_staleness(compute[s], size[s], staleness)
    if policy == MSPS:
        return divide(compute[s] + rev_comp[s], size[s]) if size[s] > 0 else math.inf
    if policy == LRU:
        return float(last_access[s])
    # LARGEST_STORAGE
    return 1.0 / size[s] if size[s] > 0 else math.inf


@njit(cache=True)
def choose(L: Layout, st: State, policy: int, uf_parent, uf_value) -> int:
    """simrd's Heuristic.choose: scan the pool in order, keep the last minimum, stop at a zero.

    Each policy gets its own inlined copy of the scan, so the score branch folds away.
    """
    if policy == DTR:
        return _scan(L, st, DTR, uf_parent, uf_value)
    if policy == DTR_EQCLASS:
        return _scan(L, st, DTR_EQCLASS, uf_parent, uf_value)
    if policy == DTR_LOCAL:
        return _scan(L, st, DTR_LOCAL, uf_parent, uf_value)
    if policy == MSPS:
        return _scan(L, st, MSPS, uf_parent, uf_value)
    if policy == LRU:
        return _scan(L, st, LRU, uf_parent, uf_value)
    return _scan(L, st, LARGEST_STORAGE, uf_parent, uf_value)


@njit(cache=True, inline="always")
def _scan(L: Layout, st: State, policy: int, uf_parent, uf_value) -> int:
    g, pool_next, size, compute = st.g, st.pool_next, L.s_size, st.s_compute
    fwd_comp, rev_comp, last_access = st.fwd_comp, st.rev_comp, st.s_last_access
    best, best_s = math.inf, -1
    s = g[POOL_HEAD]
    clock = g[CLOCK]
    while s >= 0:
        g[EVALS] += 1
        extra = 0
        if policy == DTR_EQCLASS:
            extra = class_compute(L, st, s, uf_parent, uf_value) - compute[s]
        cost = score(policy, s, clock, extra, size, compute, fwd_comp, rev_comp, last_access)
        if cost <= best:
            best, best_s = cost, s
        if cost == 0:
            break
        s = pool_next[s]
    return best_s


# ---------------------------------------------------------------- evict and compute


@njit(cache=True)
def evict(L: Layout, st: State, s: int, regions: bool, eqclass: bool, uf_parent, uf_value) -> None:
    st.s_material[s] = 0
    st.g[MEM] -= L.s_size[s]
    pool_remove(st, s, L.s_size[s])
    for k in range(L.st_ptr[s], L.st_ptr[s] + st.st_n[s]):
        st.t_defined[L.st_list[k]] = 0
    if regions:
        stack = st.stack
        # Regions bordering s take it in (pinned ones are never read, see _rebuild_unpinned).
        n = members(st.rev_fr, s, stack)
        for i in range(n):
            if not st.s_pinned[stack[i]]:
                absorb(st, stack[i], s, True)
        n = members(st.fwd_fr, s, stack)
        for i in range(n):
            if not st.s_pinned[stack[i]]:
                absorb(st, stack[i], s, False)
        st.fwd_int[s, :] = 0
        st.fwd_fr[s, :] = 0
        st.rev_int[s, :] = 0
        st.rev_fr[s, :] = 0
        st.fwd_comp[s] = 0
        st.rev_comp[s] = 0
    if eqclass:
        # A new class for s, merged with the classes of its evicted neighbours.
        node = _new_class(st, (uf_parent, uf_value), s, st.s_compute[s])
        n = evicted_neighbour_storages(L, st, s, st.stack)
        for i in range(n):
            other = find(uf_parent, st.s_node[st.stack[i]])
            if other != node:
                uf_parent[other] = node
                uf_value[node] += uf_value[other]


@njit(cache=True)
def compute(L: Layout, st: State, t: int, remat: bool, regions: bool, uf_parent, uf_value) -> None:
    """Run t's operator: simrd's RuntimeV2Optimized._compute."""
    op = L.t_op[t]
    first, last = L.op_out_ptr[op], L.op_out_ptr[op + 1]
    # Storages that become material, in simrd's order: siblings by index, then t itself.
    fresh = np.empty(last - first, np.int32)
    n_fresh = 0
    dup_bytes = 0
    for u in range(first, last):
        if u == t:
            continue
        if st.t_defined[u]:
            dup_bytes += L.t_size[u]
        if not st.s_material[L.t_storage[u]]:
            fresh[n_fresh] = L.t_storage[u]
            n_fresh += 1
    if not st.s_material[L.t_storage[t]]:
        fresh[n_fresh] = L.t_storage[t]
        n_fresh += 1
    cost = L.op_cost[op]
    st.g[CLOCK] += cost
    st.g[MEM] += L.op_total[op]
    st.g[PEAK] = max(st.g[PEAK], st.g[MEM])
    st.g[REMAT_C if remat else MODEL_C] += cost
    if remat:
        st.g[REMATS] += 1
    for u in range(first, last):
        if u == t or not st.t_defined[u]:
            st.s_material[L.t_storage[u]] = 1
            st.t_defined[u] = 1
    st.g[MEM] -= dup_bytes
    for i in range(n_fresh):
        pool_add(st, fresh[i], L.s_size[fresh[i]])
    if regions:
        _rebuild_around(L, st, fresh, n_fresh)
    for i in range(n_fresh):
        # A computed storage leaves its class's value, not the class.
        node = st.s_node[fresh[i]]
        if node >= 0:
            uf_value[find(uf_parent, node)] -= st.s_compute[fresh[i]]
            st.s_node[fresh[i]] = -1


@njit(cache=True)
def _rebuild_around(L: Layout, st: State, fresh: np.ndarray, n_fresh: int) -> None:
    """Rebuild the regions of new material storages and of the regions that bordered them."""
    words = st.fwd_fr.shape[1]
    affected = np.zeros(words, np.uint64)
    affected_rev = np.zeros(words, np.uint64)
    for i in range(n_fresh):
        s = fresh[i]
        rebuild(L, st, s, True)
        rebuild(L, st, s, False)
        affected |= st.rev_fr[s, :]
        affected_rev |= st.fwd_fr[s, :]
    _rebuild_unpinned(L, st, affected, True)
    _rebuild_unpinned(L, st, affected_rev, False)


@njit(cache=True)
def _rebuild_unpinned(L: Layout, st: State, bases: np.ndarray, forward: bool) -> None:
    """Rebuild the listed regions. A pinned storage is never scored, evicted or freed, so its
    regions are never read: simrd maintains them, skipping them changes no decision."""
    for w in range(len(bases)):
        word = bases[w]
        while word:
            base = w * 64 + _low_bit(word)
            if not st.s_pinned[base]:
                rebuild(L, st, base, forward)
            word &= word - _U1


# ---------------------------------------------------------------- the replay


@njit(cache=True, inline="always")
def _grown(a: np.ndarray, need: int) -> np.ndarray:
    if need <= len(a):
        return a
    b = np.zeros(max(need, 2 * len(a)), a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True, inline="always")
def _sample_pinned(st: State) -> None:
    pinned = st.g[MEM] - st.g[POOL_BYTES]
    if pinned > st.g[PEAK_PINNED]:
        st.g[PEAK_PINNED] = pinned
        st.g[PEAK_PINNED_DEPTH] = st.g[DEPTH]


@njit(cache=True)
def _fail(st: State, op: int, request: int, budget: int) -> None:
    st.g[FAIL_OP] = op
    st.g[FAIL_REQ] = request
    st.g[FAIL_PINNED] = st.g[MEM] - st.g[POOL_BYTES]
    st.g[FAIL_DEPTH] = st.g[DEPTH]
    st.g[FAIL_OVER] = st.g[MEM] + request - budget


@njit(cache=True, inline="always")
def _fits(st: State, request: int, budget: int) -> bool:
    """simrd's `memory + request > budget` test, narrowing the certified budget interval."""
    need = st.g[MEM] + request
    if need > budget:
        st.g[HI] = min(st.g[HI], need - 1)
        return False
    st.g[LO] = max(st.g[LO], need)
    return True


@njit(cache=True, inline="always")
def _enter(st: State, frames: np.ndarray, top: int, t: int, remat: bool) -> int:
    frames[top, 0], frames[top, 1], frames[top, 2] = t, remat, 0
    if remat:
        st.g[DEPTH] += 1
        st.g[MAX_DEPTH] = max(st.g[MAX_DEPTH], st.g[DEPTH])
    return top + 1


@njit(cache=True)
def materialize(
    L, st, t0, remat0, budget, policy, remat_limit, regions, eqclass, frames, snap, log, uf
):
    """simrd's _materialize as an explicit stack machine (no recursion limit).

    Frame columns: tensor, remat flag, phase, first and end index of its snapshot of undefined
    parents in `snap`, position in that snapshot. Returns (status, log, uf) with the arrays
    possibly reallocated.
    """
    top = _enter(st, frames, 0, t0, remat0)
    snap_top = 0
    while top:
        k = top - 1
        t, phase = frames[k, 0], frames[k, 2]
        op = L.t_op[t]
        a0, a1 = L.op_arg_ptr[op], L.op_arg_ptr[op + 1]
        if phase == 0:
            for j in range(a0, a1):
                st.s_last_access[L.t_storage[L.op_args[j]]] = st.g[CLOCK]
            for j in range(a0, a1):
                if st.t_defined[L.op_args[j]]:
                    lock(L, st, L.t_storage[L.op_args[j]])
            frames[k, 3] = snap_top
            for j in range(a0, a1):
                if not st.t_defined[L.op_args[j]]:
                    snap[snap_top] = L.op_args[j]
                    snap_top += 1
            frames[k, 4], frames[k, 5], frames[k, 2] = snap_top, frames[k, 3], 1
        elif phase == 1:
            pos = frames[k, 5]
            if pos == frames[k, 4]:
                frames[k, 2] = 3
            elif st.t_defined[snap[pos]]:
                lock(L, st, L.t_storage[snap[pos]])
                frames[k, 5] = pos + 1
            else:
                frames[k, 2] = 2
                top = _enter(st, frames, top, snap[pos], True)
        elif phase == 2:
            lock(L, st, L.t_storage[snap[frames[k, 5]]])
            frames[k, 5] += 1
            frames[k, 2] = 1
        else:
            request = L.op_total[op]
            _sample_pinned(st)
            while not _fits(st, request, budget):
                if st.g[POOL_HEAD] < 0:
                    _fail(st, op, request, budget)
                    return OOM, log, uf
                victim = choose(L, st, policy, uf[0], uf[1])
                log = _grown(log, st.g[N_EVICTED] + 1)
                log[st.g[N_EVICTED]] = victim
                st.g[N_EVICTED] += 1
                st.g[EVICTIONS] += 1
                uf = _room_for_class(uf, st, eqclass, 1)
                evict(L, st, victim, regions, eqclass, uf[0], uf[1])
            compute(L, st, t, frames[k, 1] != 0, regions, uf[0], uf[1])
            for j in range(a0, a1):
                unlock(L, st, L.t_storage[L.op_args[j]])
            if st.g[REMAT_C] > remat_limit:
                _fail(st, op, request, budget)
                st.g[FAIL_OVER] = st.g[MEM] - budget
                return THRASHED, log, uf
            top -= 1
            snap_top = frames[k, 3]
            if frames[k, 1]:
                st.g[DEPTH] -= 1
    return RUNNING, log, uf


@njit(cache=True, inline="always")
def _room_for_class(uf, st: State, eqclass: bool, more: int):
    """Classes take one union-find node per new storage and per eviction; grow on demand."""
    if not eqclass:
        return uf
    need = st.g[N_NODES] + more
    return _grown(uf[0], need), _grown(uf[1], need)


@njit(cache=True, inline="always")
def _new_class(st: State, uf, s: int, value: int) -> int:
    node = st.g[N_NODES]
    st.g[N_NODES] += 1
    uf[0][node] = node
    uf[1][node] = value
    st.s_node[s] = node
    return node


@njit(cache=True)
def _create_outputs(L: Layout, st: State, op: int, eqclass: bool, uf) -> None:
    """Register op's outputs on their storages and as neighbours of its arguments' storages.

    Under classes, a new storage starts in a class of its own with value 0: until computed it
    counts as an evicted neighbour, as in simrd, and its first computation debits that class.
    """
    first, last = L.op_out_ptr[op], L.op_out_ptr[op + 1]
    for t in range(first, last):
        s = L.t_storage[t]
        if eqclass and st.st_n[s] == 0:
            _new_class(st, uf, s, 0)
        st.st_n[s] += 1
        st.s_compute[s] += L.t_compute_gain[t]
        st.s_ref_ext[s] += 1
    for j in range(L.op_fwd_ptr[op], L.op_fwd_ptr[op + 1]):
        st.fwd_n[L.op_fwd[j]] += 1
    for j in range(L.op_rev_ptr[op], L.op_rev_ptr[op + 1]):
        st.rev_n[L.op_rev[j]] += 1


@njit(cache=True)
def replay(
    L: Layout, st: State, budget: int, policy: int, remat_limit: float, regions: bool, eqclass: bool
):
    """Replay the whole schedule; returns (status, eviction log) with counters in st.g."""
    frames = np.zeros((len(L.t_op) + 1, 6), np.int64)
    snap = np.zeros(len(L.op_args) + 1, np.int32)
    log = np.zeros(1024, np.int32)
    n_nodes = 2 * len(L.s_size) + 16 if eqclass else 1
    uf = (np.zeros(n_nodes, np.int64), np.zeros(n_nodes, np.int64))
    for i in range(len(L.cmd_kind)):
        kind, arg = L.cmd_kind[i], L.cmd_arg[i]
        status = RUNNING
        if kind == 0:  # COMPUTE
            first, last = L.op_out_ptr[arg], L.op_out_ptr[arg + 1]
            uf = _room_for_class(uf, st, eqclass, last - first)
            _create_outputs(L, st, arg, eqclass, uf)
            status, log, uf = materialize(
                L,
                st,
                first,
                False,
                budget,
                policy,
                remat_limit,
                regions,
                eqclass,
                frames,
                snap,
                log,
                uf,
            )
            for t in range(first, last):
                st.s_last_access[L.t_storage[t]] = st.g[CLOCK]
        elif kind == 1:  # GET
            st.s_ref_ext[L.t_storage[arg]] += 1
        elif kind == 2:  # PIN
            s = L.t_storage[arg]
            if not st.t_defined[arg]:
                status, log, uf = materialize(
                    L,
                    st,
                    arg,
                    True,
                    budget,
                    policy,
                    remat_limit,
                    regions,
                    eqclass,
                    frames,
                    snap,
                    log,
                    uf,
                )
            if status == RUNNING and not st.s_pinned[s]:
                lock(L, st, s)
                st.s_pinned[s] = 1
        else:  # RELEASE: the last reference gone, the storage is freed at once
            s = L.t_storage[arg]
            st.s_ref_ext[s] -= 1
            if st.s_ref_ext[s] == 0 and st.s_material[s] and not st.s_pinned[s]:
                uf = _room_for_class(uf, st, eqclass, 1)
                evict(L, st, s, regions, eqclass, uf[0], uf[1])
                st.g[EAGER] += 1
        if status != RUNNING:
            return status, log[: st.g[N_EVICTED]]
    return DONE, log[: st.g[N_EVICTED]]
