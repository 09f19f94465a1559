"""Storage betweenness: the graph it is computed on and its ranks."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from simulator.centrality import Graph, betweenness, graph_betweenness, ranks, storage_graph
from tests.support.logs import CENTRALITY_CHAIN as CHAIN
from tests.support.tracegen import random_trace_text, tiny_trace


def _networkx(graph: Graph) -> nx.DiGraph:
    """The graph as networkx holds it: nodes in order, each node's edges in insertion order."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(graph.offsets) - 1))
    for u in range(len(graph.offsets) - 1):
        for j in range(graph.offsets[u], graph.offsets[u + 1]):
            g.add_edge(u, int(graph.targets[j]), weight=float(graph.weights[j]))
    return g


def _bits(values) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def test_storage_graph_edges_and_weights() -> None:
    graph = _networkx(storage_graph(tiny_trace(CHAIN + "\n")))
    assert sorted(graph.edges(data="weight")) == [(0, 1, 1.0), (1, 2, 1.0), (2, 3, 7.0)]


def test_betweenness_of_a_chain_counts_the_paths_through_each_storage() -> None:
    # Paths a->c, a->d, b->d pass through the inner storages: b on 2 of them, c on 2.
    assert betweenness(tiny_trace(CHAIN + "\n"), 1).tolist() == [0.0, 2.0, 2.0, 0.0]


def test_betweenness_equals_networkx_bit_for_bit_on_random_traces() -> None:
    for seed in range(5):
        trace = tiny_trace(random_trace_text(seed))
        expected = nx.betweenness_centrality(
            _networkx(storage_graph(trace)), normalized=False, weight="weight"
        )
        assert _bits(betweenness(trace, 7)) == _bits([expected[n] for n in range(len(expected))])


def _random_graph(rng: random.Random, n: int, m: int, weights: list[float]) -> Graph:
    """A random simple digraph without self-loops; few distinct weights make many shortest
    paths of equal length, and a tiny weight after long paths adds nothing in floating point."""
    edges = sorted({(rng.randrange(n), rng.randrange(n)) for _ in range(m)})
    edges = [(u, v) for u, v in edges if u != v]
    rng.shuffle(edges)  # insertion order within a node's edges is part of the algorithm
    edges.sort(key=lambda e: e[0])
    offsets = np.zeros(n + 1, np.int64)
    np.add.at(offsets, [u + 1 for u, _ in edges], 1)
    return Graph(
        np.cumsum(offsets),
        np.array([v for _, v in edges], dtype=np.int64),
        np.array([rng.choice(weights) for _ in edges], dtype=np.float64),
    )


@pytest.mark.parametrize("sampled", [False, True])
def test_betweenness_equals_networkx_bit_for_bit_on_random_graphs(sampled: bool) -> None:
    """Exact and sampled (pivots drawn with the seed, then rescaled), with ties among path
    lengths and weights too small to lengthen a long path."""
    rng = random.Random(20261205)
    for case in range(12):
        n = rng.randrange(5, 60)
        weights = [[1.0, 2.0], [1.0, 3.0, 1e-9], [0.1, 0.2, 0.3], [1e9, 1e-9]][case % 4]
        graph = _random_graph(rng, n, rng.randrange(n, 4 * n), weights)
        pivots = rng.randrange(2, n) if sampled else n
        got = graph_betweenness(graph, case, n - 1 if sampled else n, pivots)
        k = pivots if sampled else None
        expected = nx.betweenness_centrality(
            _networkx(graph), k=k, normalized=False, weight="weight", seed=case
        )
        assert _bits(got) == _bits([expected[v] for v in range(n)]), f"case {case}"


def test_ranks_put_the_most_central_first_and_break_ties_by_age() -> None:
    assert ranks(np.array([0.0, 2.0, 2.0, 5.0])).tolist() == [3, 1, 2, 0]
