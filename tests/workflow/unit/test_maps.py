"""Exact maps: tiles cover every byte once, reproduce their outcome, and ignore chunking."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from dtrholes.holes import maps
from dtrholes.holes.maps import Map, MapError, Span, Tile
from dtrholes.study.parameters import Parameters
from simulator import Trace, budget_for, peak_memory, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

SEEDS = range(12)


def runner(trace: Trace, policy: str = "dtr") -> maps.Run:
    def run(budget: int):
        return simulate(trace, budget, policy), f"run-{budget}"

    return run


def tiled(trace: Trace, span: Span, chunks: int = 1, max_runs: int = 10**6) -> Map:
    parts = [
        maps.tile(runner(trace), part, max_runs, chunk=i)
        for i, part in enumerate(maps.split(span, chunks))
    ]
    return Map(trace.name, "dtr", peak_memory(trace), (span,), tuple(t for p in parts for t in p))


def random_map(seed: int, chunks: int = 1) -> tuple[Trace, Map]:
    trace = tiny_trace(random_trace_text(seed))
    return trace, tiled(trace, Span(0, peak_memory(trace) + 10), chunks)


def _execution(t: Tile) -> tuple:
    return (t.first, t.last, t.outcome, t.overhead, t.budget_lo, t.budget_hi)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_budgets_inside_random_tiles_reproduce_the_outcome(seed: int) -> None:
    trace, m = random_map(seed)
    maps.check(list(m.tiles), list(m.ranges), f"seed {seed}")
    rng = random.Random(seed)
    for t in rng.sample(m.tiles, min(5, len(m.tiles))):
        for budget in {t.first, t.last, rng.randint(t.first, t.last)}:
            again = simulate(trace, budget, "dtr")
            assert (again.outcome, again.overhead) == (t.outcome, t.overhead), (seed, t, budget)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_map_does_not_depend_on_how_the_range_is_split(seed: int) -> None:
    _, whole = random_map(seed)
    reference = [_execution(t) for t in maps.canonical(whole.tiles)]
    for chunks in (2, 3, 7):
        _, split = random_map(seed, chunks)
        assert [_execution(t) for t in maps.canonical(split.tiles)] == reference
        assert maps.segments(split.tiles) == maps.segments(whole.tiles)
        assert replace(maps.summarise(split), runs=0) == replace(maps.summarise(whole), runs=0)


def test_adjacent_tiles_are_split_runs_only_at_chunk_boundaries() -> None:
    for seed in SEEDS:
        _, m = random_map(seed, 4)
        starts = {c.first for c in maps.split(m.ranges[0], 4)}
        tiles = sorted(m.tiles, key=lambda t: t.first)
        for a, b in zip(tiles, tiles[1:], strict=False):
            if maps._same_run(a, b):
                assert b.first in starts


def test_gaps_and_overlaps_are_errors_naming_the_byte() -> None:
    ranges = [Span(0, 99)]
    tiles = [Tile(0, 49, "ok"), Tile(50, 99, "oom")]
    maps.check(tiles, ranges, "t")
    with pytest.raises(MapError, match="starting at byte 50, found bytes 51..99"):
        maps.check([tiles[0], Tile(51, 99, "oom")], ranges, "t")
    with pytest.raises(MapError, match="starting at byte 50, found bytes 40..99"):
        maps.check([tiles[0], Tile(40, 99, "oom")], ranges, "t")
    with pytest.raises(MapError, match="ending by byte 99"):
        maps.check([tiles[0], Tile(50, 120, "oom")], ranges, "t")
    with pytest.raises(MapError, match="no tile outside"):
        maps.check([*tiles, Tile(200, 210, "ok")], ranges, "t")
    with pytest.raises(MapError, match="starting at byte 0, found none"):
        maps.check([], ranges, "t")


def test_a_table_with_a_gap_is_not_written(tmp_path) -> None:
    m = Map("t", "dtr", 100, (Span(0, 99),), (Tile(0, 49, "ok"), Tile(51, 99, "ok")))
    with pytest.raises(MapError):
        maps.write(m, tmp_path / "m.parquet")
    assert not (tmp_path / "m.parquet").exists()


def test_tables_round_trip(tmp_path) -> None:
    _, m = random_map(3, 2)
    maps.write(m, tmp_path / "m.parquet")
    back = maps.read(tmp_path / "m.parquet")
    assert sorted(back.tiles, key=lambda t: t.first) == sorted(m.tiles, key=lambda t: t.first)
    assert (back.ranges, back.peak) == (m.ranges, m.peak)


def test_a_merged_map_states_its_chunks_record_checksums(tmp_path) -> None:
    low = Map("t", "dtr", 100, (Span(0, 49),), (Tile(0, 49, "ok", run_id="a"),), {"a": "1"})
    high = Map("t", "dtr", 100, (Span(50, 99),), (Tile(50, 99, "oom", run_id="b"),), {"b": "2"})
    merged = maps.merge([high, low], "merged")
    maps.write(merged, tmp_path / "m.parquet")
    assert maps.read(tmp_path / "m.parquet").record_sha256 == {"a": "1", "b": "2"}
    assert maps.listing(tmp_path / "m.parquet") == (["a", "b"], {"a": "1", "b": "2"})
    older = maps.merge([low, replace(high, record_sha256=None)], "merged")  # one chunk predates
    assert older.record_sha256 is None


def test_the_run_cap_leaves_the_rest_uncovered() -> None:
    trace = tiny_trace(random_trace_text(1))
    capped = tiled(trace, Span(0, peak_memory(trace)), max_runs=2)
    assert capped.runs == 2
    assert capped.tiles[-1].outcome == maps.UNCOVERED and capped.tiles[-1].reason == "run cap"
    maps.check(list(capped.tiles), list(capped.ranges), "capped")
    assert maps.summarise(capped).uncovered == capped.tiles[-1].width


def test_a_timeout_stops_the_chunk() -> None:
    def run(budget: int):
        return None, "slow"

    tiles = maps.tile(run, Span(10, 20), 100)
    assert [(t.first, t.last, t.outcome) for t in tiles] == [
        (10, 10, "timeout"),
        (11, 20, "uncovered"),
    ]


def test_holes_are_failing_segments_above_the_first_success() -> None:
    tiles = (
        Tile(0, 9, "oom"),
        Tile(10, 19, "ok"),
        Tile(20, 24, "oom"),
        Tile(25, 29, "thrashed"),
        Tile(30, 39, "ok"),
        Tile(40, 44, "oom"),
        Tile(45, 49, "uncovered"),
        Tile(50, 59, "ok"),
    )
    summary = maps.summarise(Map("t", "dtr", 100, (Span(0, 59),), tiles))
    assert summary.first_success == 10
    assert [(h.first, h.last, h.width, h.exact) for h in summary.holes] == [
        (20, 29, 10, True),
        (40, 44, 5, False),
    ]
    assert (summary.covered, summary.uncovered, summary.monotone) == (55, 5, False)


@pytest.fixture(scope="module")
def resnet32_map(load_named) -> tuple[Trace, Map]:
    trace = load_named("resnet32")
    peak = peak_memory(trace)
    span = Span(budget_for(trace, 0.100, peak), budget_for(trace, 0.108, peak))
    tiles = maps.tile(runner(trace), span, 5000)
    return trace, Map(trace.name, "dtr", peak, (span,), tuple(tiles))


def test_resnet32_map_finds_the_known_region(resnet32_map) -> None:
    _, m = resnet32_map
    assert maps.outcome_at(m, 1_024_657_199) == "ok"
    assert maps.outcome_at(m, 1_024_657_200) == "oom"
    holes = maps.summarise(m).holes
    assert all(h.exact for h in holes)
    known = [h for h in holes if h.first == 1_024_657_200]
    assert known and known[0].last / m.peak > 0.106


def test_resnet32_map_agrees_with_samples_every_0_001(resnet32_map) -> None:
    trace, m = resnet32_map
    for step in range(9):
        budget = budget_for(trace, round(0.100 + step * 0.001, 3), m.peak)
        assert maps.outcome_at(m, budget) == simulate(trace, budget, "dtr").outcome, budget


def test_map_command_writes_a_checked_table_and_a_verdict(tmp_path, capsys) -> None:
    from dtrholes import cli

    log = tmp_path / "tiny.log"
    log.write_text(random_trace_text(5))
    out = tmp_path / "map.parquet"
    args = ["map", "--trace", str(log), "--from", "0.2", "--to", "1.0", "--chunks", "3"]
    assert cli.main([*args, "--out", str(out)]) == 0
    m = maps.read(out)
    assert m.runs > 0 and maps.summarise(m).uncovered == 0
    assert "runs," in capsys.readouterr().out
    assert cli.main([*args[:-2], "--param", "alpha=0.3", "--policy", "tcontrol-inspired",
                     "--out", str(out)]) == 0  # fmt: skip
    m = maps.read(out)
    assert 0 < m.runs < m.ranges[0].last - m.ranges[0].first and not maps.summarise(m).uncovered


def _record(result, stage: str, outcome: str) -> dict:
    fields = {**result.to_dict(), "outcome": outcome}
    return {"stage": stage, "status": "complete", "budget": result.budget, "ratio": None,
            "result": fields}  # fmt: skip


def test_the_plan_maps_cheap_series_whole_and_others_around_sampled_regions() -> None:
    from dtrholes.pipeline import stages

    trace = tiny_trace(random_trace_text(2))
    peak = peak_memory(trace)
    params = Parameters.from_dict(
        {
            "stage_a": {"ratios": {"start": 0.1, "stop": 0.9, "step": 0.1}},
            "maps": {"margin": 0.01, "max_runs": 100, "whole_range_cap": 0},
        }
    )
    budgets = [budget_for(None, r / 10, peak) for r in range(1, 10)]
    outcomes = ["oom", "ok", "ok", "oom", "oom", "ok", "ok", "ok", "ok"]
    listed = [_record(simulate(trace, b, "dtr"), "A", o) for b, o in zip(budgets, outcomes)]  # noqa: B905
    found = stages.map_plan(params, peak, {"dtr": listed, "lru": listed}, whole=False)
    margin = int(0.01 * peak)
    assert found["neighbourhoods"] == [[budgets[2] - margin, budgets[5] + margin]]
    assert found["policies"]["dtr"]["ranges"] == found["neighbourhoods"]
    assert not found["policies"]["dtr"]["whole"]
    whole = stages.map_plan(params, peak, {"dtr": listed}, whole=True)
    assert whole["policies"]["dtr"]["ranges"] == [[budgets[0], budgets[-1]]]
    # A policy whose score reads the budget is not mapped: each run certifies one budget.
    skipped = stages.map_plan(params, peak, {"dtr": listed}, True, frozenset({"dtr"}))
    assert skipped["policies"]["dtr"] == {
        "estimate": 0,
        "whole": False,
        "ranges": [],
        "reads_budget": True,
    }
