"""Per-trace cache of storage betweenness (TControlInspired's ranking), as Parquet files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dtrholes.core import files, paths
from simulator import centrality, get_policy
from simulator.trace import Trace

RESULTS_ENV = "DTR_HOLES_RESULTS"
METHOD = (
    f"networkx-betweenness-unnormalised-exact{centrality.EXACT_LIMIT}-pivots{centrality.PIVOTS}"
)


def default_results_dir() -> Path:
    """$DTR_HOLES_RESULTS, else the repository's results/."""
    return Path(os.environ.get(RESULTS_ENV) or Path(__file__).resolve().parents[3] / paths.RESULTS)


def cache_path(results_dir: str | Path, name: str, sha256: str, seed: int) -> Path:
    """Where the betweenness of trace `name` (content `sha256`) under `seed` is cached."""
    return paths.ranking(name, sha256[:16], seed, Path(results_dir))


def load_betweenness(trace: Trace, seed: int, results_dir: Path | None = None) -> np.ndarray:
    """Betweenness of every storage of `trace`, computed once per trace sha256, seed and method."""
    path = cache_path(results_dir or default_results_dir(), trace.name, trace.sha256, seed)
    key = {b"trace_sha256": trace.sha256.encode(), b"method": METHOD.encode()}
    if path.is_file():
        try:
            table = pq.read_table(path)
            if all(table.schema.metadata.get(k) == v for k, v in key.items()):
                return table.column("betweenness").to_numpy()
        except (OSError, pa.ArrowException):
            pass  # a damaged cache entry is recomputed, not reported
    values = centrality.betweenness(trace, seed)
    schema = pa.schema([pa.field("betweenness", pa.float64(), nullable=False)], metadata=key)
    files.write_table(pa.table({"betweenness": values}, schema=schema), path)
    return values


def for_policy(
    trace: Trace, policy: str, params: dict[str, float], results_dir: Path | None = None
) -> np.ndarray | None:
    """The cached betweenness a policy reads, or None for policies that read none."""
    seed = ranking_seed(policy, params)
    return None if seed is None else load_betweenness(trace, seed, results_dir)


def ranking_seed(policy: str, params: dict[str, float]) -> int | None:
    """The seed of the betweenness a policy reads, or None for policies that read none."""
    chosen = get_policy(policy)
    if not chosen.centrality:
        return None
    return int(dict(chosen.resolve(params)).get("seed", centrality.DEFAULT_SEED))
