"""Equivalence classes of evicted storages (DTREqClass): union-find and class values."""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.kernel.state import COMPUTE, MATERIAL, N_FWD, N_NODES, N_REV, NODE
from simulator.layout import S_FWD, S_REV


@njit(inline="always")
def find(parent: np.ndarray, node: int) -> int:
    root = node
    while parent[root] != root:
        root = parent[root]
    while parent[node] != root:
        parent[node], node = root, parent[node]
    return root


@njit
def evicted_neighbours(s: int, sv: np.ndarray, stor: np.ndarray, flat, out: np.ndarray) -> int:
    """Storages adjacent to s through a parent or child tensor that are not material."""
    n = 0
    for ptr, visible in ((S_REV, N_REV), (S_FWD, N_FWD)):
        for j in range(stor[ptr, s], stor[ptr, s] + sv[visible, s]):
            if not sv[MATERIAL, flat[j]]:
                out[n] = flat[j]
                n += 1
    return n


@njit
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


@njit(inline="always")
def new_class(s: int, value: int, g: np.ndarray, sv: np.ndarray, uf_parent, uf_value) -> int:
    node = g[N_NODES]
    g[N_NODES] += 1
    uf_parent[node] = node
    uf_value[node] = value
    sv[NODE, s] = node
    return node
