"""Betweenness centrality of a trace's storage graph, as TControlInspired ranks storages by it."""

from __future__ import annotations

from functools import lru_cache

import networkx as nx
import numpy as np

from simulator.layout import S_FWD, T_GAIN, T_STORAGE, build_layout
from simulator.trace import Trace

EXACT_LIMIT = 6000  # vertices up to which centrality is exact; above, pivots are sampled
PIVOTS = 1000
MIN_WEIGHT = 1e-9


def storage_graph(trace: Trace) -> nx.DiGraph:
    """Storages of the whole traced iteration; an edge u -> v for each parent storage u of a
    tensor in v (u != v), weighted by v's compute (at least MIN_WEIGHT)."""
    layout = build_layout(trace)
    n = layout.stor.shape[1] - 1
    compute = np.zeros(n, dtype=np.int64)
    np.add.at(compute, layout.tens[T_STORAGE], layout.tens[T_GAIN])
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    # The forward lists hold each parent -> child storage pair once, never a self-loop.
    for u in range(n):
        for v in layout.flat[layout.stor[S_FWD, u] : layout.stor[S_FWD, u + 1]]:
            graph.add_edge(u, int(v), weight=max(float(compute[v]), MIN_WEIGHT))
    return graph


@lru_cache(maxsize=16)
def betweenness(trace: Trace, seed: int) -> np.ndarray:
    """Unnormalised betweenness of every storage; exact up to EXACT_LIMIT storages, else
    estimated from PIVOTS sampled sources drawn with `seed`."""
    graph = storage_graph(trace)
    k = None if graph.number_of_nodes() <= EXACT_LIMIT else PIVOTS
    values = nx.betweenness_centrality(graph, k=k, normalized=False, weight="weight", seed=seed)
    return np.array([values[s] for s in range(graph.number_of_nodes())], dtype=np.float64)


def ranks(values: np.ndarray) -> np.ndarray:
    """Rank of each storage by centrality, 0 = most central; ties go to the older storage."""
    order = np.lexsort((np.arange(len(values)), -values))
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values))
    return rank
