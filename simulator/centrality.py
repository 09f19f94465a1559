"""Betweenness centrality of a trace's storage graph, as TControlInspired ranks storages by it.

The values are networkx 3.6's `betweenness_centrality(graph, k, normalized=False,
weight="weight", seed=seed)` bit for bit (the tests compare them): the same sources (Python's
`random.Random(seed).sample` of the nodes), Dijkstra's order of settling and of adding path
counts (a heap ordered by distance, then push order; the source counted twice, as there), the
same accumulation order and the same rescaling, compiled instead of interpreted.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numba import njit

from simulator.layout import S_FWD, T_GAIN, T_STORAGE, build_layout
from simulator.trace import Trace

EXACT_LIMIT = 6000  # vertices up to which centrality is exact; above, pivots are sampled
PIVOTS = 1000
MIN_WEIGHT = 1e-9


class Graph(NamedTuple):
    """A directed graph in compressed rows: node u's edges are u -> targets[j], weights[j]
    for j in offsets[u]..offsets[u + 1] - 1, in insertion order."""

    offsets: np.ndarray
    targets: np.ndarray
    weights: np.ndarray


def storage_graph(trace: Trace) -> Graph:
    """Storages of the whole traced iteration; an edge u -> v for each parent storage u of a
    tensor in v (u != v), weighted by v's compute (at least MIN_WEIGHT)."""
    layout = build_layout(trace)
    n = layout.stor.shape[1] - 1
    compute = np.zeros(n, dtype=np.int64)
    np.add.at(compute, layout.tens[T_STORAGE], layout.tens[T_GAIN])
    # The forward lists hold each parent -> child storage pair once, never a self-loop.
    offsets = layout.stor[S_FWD] - layout.stor[S_FWD, 0]
    targets = layout.flat[layout.stor[S_FWD, 0] : layout.stor[S_FWD, n]].astype(np.int64)
    weights = np.maximum(compute[targets].astype(np.float64), MIN_WEIGHT)
    return Graph(offsets.astype(np.int64), targets, weights)


DEFAULT_SEED = 20260926  # of the sampled betweenness, when a policy names none


@lru_cache(maxsize=16)
def betweenness(trace: Trace, seed: int) -> np.ndarray:
    """Unnormalised betweenness of every storage; exact up to EXACT_LIMIT storages, else
    estimated from PIVOTS sampled sources drawn with `seed`."""
    return graph_betweenness(storage_graph(trace), seed, EXACT_LIMIT, PIVOTS)


def graph_betweenness(graph: Graph, seed: int, exact_limit: int, pivots: int) -> np.ndarray:
    """Unnormalised betweenness of every node of `graph`: from every node as a source up to
    `exact_limit` nodes, else from `pivots` sources sampled with `seed`."""
    n = len(graph.offsets) - 1
    sampled = n > exact_limit and pivots != n
    sources = random.Random(seed).sample(range(n), pivots) if sampled else range(n)
    values = np.zeros(n, dtype=np.float64)
    _accumulate(*graph, np.array(sources, dtype=np.int64), values)
    if sampled and n - 1 >= 2:  # networkx's rescaling of a sample, sources apart
        scale = np.full(n, (n - 1) / pivots)
        scale[sources] = (n - 1) / (pivots - 1) if pivots > 1 else np.nan
        values *= scale
    return values


@njit(cache=True)
def _accumulate(offsets, targets, weights, sources, values) -> None:
    """Add each source's dependencies to `values` (Brandes), in networkx's order of operations."""
    n, m = len(offsets) - 1, len(targets)
    first = np.zeros(n + 1, np.int64)  # each node's slice of `preds`: its in-degree
    for j in range(m):
        first[targets[j] + 1] += 1
    first = np.cumsum(first)
    preds = np.zeros(max(m, 1), np.int64)
    n_preds = np.zeros(n, np.int64)
    sigma = np.zeros(n)
    delta = np.zeros(n)
    seen = np.zeros(n)
    was_seen = np.zeros(n, np.bool_)
    settled = np.zeros(n, np.bool_)
    order = np.zeros(n, np.int64)
    heap_d = np.zeros(m + 1)
    heap_c = np.zeros(m + 1, np.int64)
    heap_p = np.zeros(m + 1, np.int64)
    heap_v = np.zeros(m + 1, np.int64)
    for s in sources:
        sigma[:] = 0.0
        n_preds[:] = 0
        was_seen[:] = False
        settled[:] = False
        sigma[s], seen[s], was_seen[s] = 1.0, 0.0, True
        heap_d[0], heap_c[0], heap_p[0], heap_v[0] = 0.0, 0, s, s
        size, pushed, n_order = 1, 1, 0
        while size:
            dist, pred, v = heap_d[0], heap_p[0], heap_v[0]
            size -= 1
            _drop_root(heap_d, heap_c, heap_p, heap_v, size)
            if settled[v]:
                continue
            sigma[v] += sigma[pred]
            order[n_order] = v
            n_order += 1
            settled[v] = True
            for j in range(offsets[v], offsets[v + 1]):
                w = targets[j]
                d = dist + weights[j]
                if not settled[w] and (not was_seen[w] or d < seen[w]):
                    seen[w], was_seen[w] = d, True
                    _push(heap_d, heap_c, heap_p, heap_v, size, d, pushed, v, w)
                    size += 1
                    pushed += 1
                    sigma[w] = 0.0
                    preds[first[w]] = v
                    n_preds[w] = 1
                elif d == seen[w]:
                    sigma[w] += sigma[v]
                    preds[first[w] + n_preds[w]] = v
                    n_preds[w] += 1
        for i in range(n_order):
            delta[order[i]] = 0.0
        for i in range(n_order - 1, -1, -1):
            w = order[i]
            coeff = (1.0 + delta[w]) / sigma[w]
            for q in range(first[w], first[w] + n_preds[w]):
                delta[preds[q]] += sigma[preds[q]] * coeff
            if w != s:
                values[w] += delta[w]


@njit(cache=True, inline="always")
def _before(hd, hc, i, j) -> bool:
    return hd[i] < hd[j] or (hd[i] == hd[j] and hc[i] < hc[j])


@njit(cache=True, inline="always")
def _swap(hd, hc, hp, hv, i, j) -> None:
    hd[i], hd[j] = hd[j], hd[i]
    hc[i], hc[j] = hc[j], hc[i]
    hp[i], hp[j] = hp[j], hp[i]
    hv[i], hv[j] = hv[j], hv[i]


@njit(cache=True)
def _push(hd, hc, hp, hv, size, d, c, p, v) -> None:
    """Add entry (d, c, p, v) to the heap of `size` entries (keys (d, c) are unique)."""
    hd[size], hc[size], hp[size], hv[size] = d, c, p, v
    i = size
    while i and _before(hd, hc, i, (i - 1) >> 1):
        _swap(hd, hc, hp, hv, i, (i - 1) >> 1)
        i = (i - 1) >> 1


@njit(cache=True)
def _drop_root(hd, hc, hp, hv, size) -> None:
    """Remove the root: the last of `size` + 1 entries takes its place and sinks."""
    hd[0], hc[0], hp[0], hv[0] = hd[size], hc[size], hp[size], hv[size]
    i = 0
    while True:
        low, child = i, 2 * i + 1
        if child < size and _before(hd, hc, child, low):
            low = child
        if child + 1 < size and _before(hd, hc, child + 1, low):
            low = child + 1
        if low == i:
            return
        _swap(hd, hc, hp, hv, i, low)
        i = low


def ranks(values: np.ndarray) -> np.ndarray:
    """Rank of each storage by centrality, 0 = most central; ties go to the older storage."""
    order = np.lexsort((np.arange(len(values)), -values))
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values))
    return rank
