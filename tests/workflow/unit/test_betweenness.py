"""The workflow's betweenness: its per-trace cache, the rank command filling it, and which
policies rank by it."""

from __future__ import annotations

from pathlib import Path

from dtrholes.cli import main
from dtrholes.traces.betweenness import cache_path, load_betweenness, ranking_seed
from simulator import read_trace
from tests.support.logs import CENTRALITY_CHAIN as CHAIN
from tests.support.tracegen import tiny_trace


def test_cache_is_written_once_and_reused(tmp_path) -> None:
    trace = tiny_trace(CHAIN + "\n")
    first = load_betweenness(trace, 3, tmp_path)
    path = cache_path(tmp_path, trace.name, trace.sha256, 3)
    stamp = path.stat().st_mtime_ns
    assert load_betweenness(trace, 3, tmp_path).tolist() == first.tolist()
    assert path.stat().st_mtime_ns == stamp


def test_damaged_cache_is_recomputed(tmp_path) -> None:
    trace = tiny_trace(CHAIN + "\n")
    path = cache_path(tmp_path, trace.name, trace.sha256, 3)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not parquet")
    assert load_betweenness(trace, 3, tmp_path).tolist() == [0.0, 2.0, 2.0, 0.0]
    assert path.read_bytes()[:4] == b"PAR1"


def test_only_ranking_policies_have_a_ranking_seed() -> None:
    assert ranking_seed("dtr", {}) is None
    assert ranking_seed("tcontrol-inspired", {}) == 20260926
    assert ranking_seed("tcontrol-inspired", {"seed": 7.0}) == 7


def test_rank_command_fills_the_cache_the_runs_read(tmp_path, capsys) -> None:
    log = tmp_path / "chain.log"
    log.write_text(CHAIN + "\n")
    results = tmp_path / "results"
    assert main(f"rank --trace {log} --seed 3 --data {tmp_path} --results {results}".split()) == 0
    path = Path(capsys.readouterr().out.strip())
    trace = read_trace(log)
    assert path == cache_path(results, trace.name, trace.sha256, 3)
    stamp = path.stat().st_mtime_ns
    assert load_betweenness(trace, 3, results).tolist() == [0.0, 2.0, 2.0, 0.0]
    assert path.stat().st_mtime_ns == stamp
