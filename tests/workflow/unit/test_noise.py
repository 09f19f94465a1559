"""The cost-noise study's table: a region persists where a perturbed map fails near it."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dtrholes.cli import main
from dtrholes.holes import maps, noise
from dtrholes.holes.maps import Map, Span, Tile
from dtrholes.traces import fetch
from dtrholes.traces.recost import Recipe

REPO = Path(__file__).resolve().parents[3]
PEAK = 100_000  # WIDEN (0.002) of it: 200 bytes


def mapped(trace: str, *outcomes: tuple[int, int, str]) -> Map:
    tiles = tuple(Tile(first, last, outcome) for first, last, outcome in outcomes)
    return Map(trace, "dtr", PEAK, (Span(tiles[0].first, tiles[-1].last),), tiles)


ORIGINAL = mapped("t", (0, 999, "oom"), (1000, 4999, "ok"), (5000, 5099, "oom"), (5100, 9999, "ok"))


def perturbed(seed: int, *outcomes) -> tuple[noise.Perturbed, Map]:
    p = noise.Perturbed(f"t_{seed}", "t", Recipe("lognormal", 0.05, seed))
    return p, mapped(p.name, *outcomes)


def test_a_region_persists_where_a_hole_overlaps_its_widened_span() -> None:
    same = perturbed(
        0, (0, 999, "oom"), (1000, 4999, "ok"), (5000, 5099, "oom"), (5100, 9999, "ok")
    )
    moved = perturbed(
        1, (0, 999, "oom"), (1000, 5249, "ok"), (5250, 5300, "thrashed"), (5301, 9999, "ok")
    )
    too_far = perturbed(
        2, (0, 999, "oom"), (1000, 5300, "ok"), (5301, 5400, "oom"), (5401, 9999, "ok")
    )
    gone = perturbed(3, (0, 999, "oom"), (1000, 9999, "ok"))
    rows = noise.persistence(ORIGINAL, [same, moved, too_far, gone])
    assert [r["persists"] for r in rows] == [True, True, False, False]
    assert (rows[0]["first_shift"], rows[0]["last_shift"]) == (0, 0)
    assert (rows[1]["first_shift"], rows[1]["last_shift"]) == (250, 201)
    assert rows[2]["first_shift"] is None and not any(r["absorbed"] for r in rows)
    summary = noise.summary(rows)
    assert len(summary) == 1
    assert summary[0]["persists"] == 2 and summary[0]["perturbations"] == 4
    assert summary[0]["largest_move"] == pytest.approx(250 / PEAK)
    assert summary[0]["median_move"] == pytest.approx(100.5 / PEAK)  # of 0, 0, 250, 201
    text = noise.markdown([(ORIGINAL, [same, moved, too_far, gone])], summary)
    assert "| 0 | 0.0500–0.0510 | 100 | 0.05 | 2/4 | 0 |" in text
    assert (
        "Holes in the original map: 1; in each perturbed map, by seed: σ 0.05: 1, 1, 1, 0." in text
    )


def test_a_region_the_failing_range_below_the_first_success_absorbs_persists() -> None:
    low_only = mapped("t", (0, 5150, "oom"), (5151, 9999, "ok"))
    p = noise.Perturbed("t_9", "t", Recipe("lognormal", 0.2, 9))
    (row,) = noise.persistence(ORIGINAL, [(p, low_only)])
    assert row["persists"] and row["absorbed"]
    assert row["first_shift"] is None and row["last_shift"] is None
    (told,) = noise.summary([row])
    assert (told["persists"], told["absorbed"]) == (1, 1)
    assert told["median_move"] is None


def test_a_hole_next_to_the_failing_range_below_the_first_success_is_not_absorbed() -> None:
    both = mapped(
        "t", (0, 4900, "oom"), (4901, 4999, "ok"), (5000, 5120, "oom"), (5121, 9999, "ok")
    )
    p = noise.Perturbed("t_9", "t", Recipe("lognormal", 0.2, 9))
    (row,) = noise.persistence(ORIGINAL, [(p, both)])
    assert row["persists"] and not row["absorbed"]
    assert (row["first_shift"], row["last_shift"]) == (0, 21)


def test_an_original_without_holes_is_listed_with_its_perturbations_holes() -> None:
    flat = mapped("t", (0, 999, "oom"), (1000, 9999, "ok"))
    new = perturbed(0, (0, 999, "oom"), (1000, 4999, "ok"), (5000, 5099, "oom"), (5100, 9999, "ok"))
    text = noise.markdown([(flat, [new])], noise.summary(noise.persistence(flat, [new])))
    assert "No hole in the original map." in text
    assert "Holes in the original map: 0; in each perturbed map, by seed: σ 0.05: 1." in text


def test_perturbations_are_the_sheets_lognormal_recosts() -> None:
    found = noise.perturbations(fetch.read_sheet(REPO / "config" / "cost-noise.tsv"))
    assert len(found) == 60
    assert {p.base for p in found} == {"unet", "resnet32"}
    assert {p.recipe.sigma for p in found} == {0.01, 0.05, 0.2}
    assert {p.recipe.seed for p in found} == set(range(10))


def test_the_cost_noise_sheet_holds_the_study_sheet_unchanged() -> None:
    study = fetch.DEFAULT_SHEET.read_text().splitlines()
    assert (REPO / "config" / "cost-noise.tsv").read_text().splitlines()[: len(study)] == study


def test_the_step_writes_table_markdown_and_figure(tmp_path: Path, capsys) -> None:
    sheet = tmp_path / "traces.tsv"
    sheet.write_text(
        "name\tfile\tsha256\trole\ttitle\n"
        f"t\tt.log\t{'a' * 64}\town\tT\n"
        f"t_0\trecost:t:lognormal:0.05:0\t{'b' * 64}\town\tT, noisy\n"
        f"t_1\trecost:t:lognormal:0.05:1\t{'c' * 64}\town\tT, noisy\n"
    )
    _, same = perturbed(0, *[(t.first, t.last, t.outcome) for t in ORIGINAL.tiles])
    _, gone = perturbed(1, (0, 999, "oom"), (1000, 9999, "ok"))
    written = []
    for m in (ORIGINAL, same, gone):
        written.append(tmp_path / f"{m.trace}.parquet")
        maps.write(m, written[-1])
    out = tmp_path / "out"
    argv = ["noise-table", "--maps", *map(str, written), "--sheet", str(sheet)]
    argv += ["--out", str(out / "noise.parquet"), "--markdown", str(out / "noise.md")]
    assert main([*argv, "--figure", str(out / "noise")]) == 0
    table = pq.read_table(out / "noise.parquet").to_pylist()
    assert [(r["perturbed"], r["persists"]) for r in table] == [("t_0", True), ("t_1", False)]
    assert "| 0 | 0.0500–0.0510 | 100 | 0.05 | 1/2 | 0 |" in (out / "noise.md").read_text()
    assert (out / "noise.png").stat().st_size > 0 and (out / "noise.pdf").stat().st_size > 0
    first = (out / "noise.png").read_bytes()
    assert main([*argv, "--figure", str(out / "noise")]) == 0
    assert (out / "noise.png").read_bytes() == first  # byte-identical figures
    alone = ["noise-table", "--maps", str(written[0]), "--sheet", str(sheet)]
    alone += ["--out", str(out / "x.parquet"), "--markdown", str(out / "x.md")]
    assert main([*alone, "--figure", str(out / "x")]) == 2
    assert "expected the map of a trace and of its perturbations" in capsys.readouterr().err


def test_a_regions_edges_move_to_the_hole_overlapping_it_most_else_the_nearest() -> None:
    # the region is 5000-5099, widened to 4800-5299
    overlapping = perturbed(
        4,
        (0, 999, "oom"),
        (1000, 4809, "ok"),
        (4810, 5009, "oom"),  # overlaps the region by 10 budgets, its widened span by 200
        (5010, 5079, "ok"),
        (5080, 5400, "oom"),  # overlaps the region by 20
        (5401, 9999, "ok"),
    )
    near = perturbed(
        5,
        (0, 999, "oom"),
        (1000, 4849, "ok"),
        (4850, 4900, "oom"),  # 99 below the region
        (4901, 5149, "ok"),
        (5150, 5290, "oom"),  # 50 above it
        (5291, 9999, "ok"),
    )
    rows = noise.persistence(ORIGINAL, [overlapping, near])
    assert [(r["first_shift"], r["last_shift"]) for r in rows] == [(80, 301), (150, 191)]


def test_a_region_where_the_map_leaves_budgets_uncovered_is_unknown() -> None:
    gap_there = perturbed(6, (0, 999, "oom"), (1000, 4899, "ok"), (5200, 9999, "ok"))
    gap_elsewhere = perturbed(7, (0, 999, "oom"), (1000, 6999, "ok"), (7500, 9999, "ok"))
    timed_out = perturbed(
        8, (0, 999, "oom"), (1000, 5049, "ok"), (5050, 5060, "timeout"), (5061, 9999, "ok")
    )
    rows = noise.persistence(ORIGINAL, [gap_there, gap_elsewhere, timed_out])
    assert [r["persists"] for r in rows] == [None, False, None]
    (told,) = noise.summary(rows)
    assert (told["persists"], told["unknown"]) == (0, 2)
    assert "| 0.05 | 0/3 (2 unknown) |" in noise.markdown([(ORIGINAL, [gap_there])], [told])
