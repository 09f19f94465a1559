"""The evictable pool: storages in insertion order (simrd's), as a linked list in `sv`."""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.kernel.state import IN_POOL, NEXT, POOL_BYTES, POOL_HEAD, POOL_TAIL, PREV, REF_INT
from simulator.layout import S_SIZE


@njit
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


@njit
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


@njit
def lock(g: np.ndarray, sv: np.ndarray, stor: np.ndarray, s: int) -> None:
    if sv[REF_INT, s] == 0:
        pool_remove(g, sv, s, stor[S_SIZE, s])
    sv[REF_INT, s] += 1


@njit
def unlock(g: np.ndarray, sv: np.ndarray, stor: np.ndarray, s: int) -> None:
    sv[REF_INT, s] -= 1
    if sv[REF_INT, s] == 0:
        pool_add(g, sv, s, stor[S_SIZE, s])
