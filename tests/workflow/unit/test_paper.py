"""The study's rules reproduce its published tables; compare() sets our runs beside them."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pyarrow.parquet as pq
import pytest

from dtrholes.core.samples import Sample
from dtrholes.report.paper import comparison, output, rules
from dtrholes.report.paper.published import (
    FINAL_KINDS,
    Published,
    PublishedRun,
    load,
    render,
    simrd_points,
    span,
    study_names,
    study_samples,
)
from simulator.result import TIMEOUT


@pytest.fixture(scope="module")
def published() -> Published:
    return load()


@pytest.fixture(scope="module")
def study(published: Published) -> list[Sample]:
    return study_samples(published)


def record(point: PublishedRun, outcome: str | None = None, overhead: float | None = None) -> dict:
    """A records-table row of ours for a study point: its outcome, or `outcome` instead."""
    outcome = outcome or point.status
    if outcome == "ok" and overhead is None:
        overhead = float(point.overhead)
    return {
        "run_id": f"ours:{point.run_id}",
        "trace": point.trace,
        "policy": point.policy,
        "budget": point.budget,
        "ratio": float(point.ratio),
        "stage": study_names().stages[point.stage],
        "repeat": point.repeat,
        "status": "timeout" if outcome == "timeout" else "complete",
        "outcome": None if outcome == "timeout" else outcome,
        "overhead": overhead if outcome == "ok" else None,
        "protocol_version": "test",
    }


def ours_from(published: Published, change=None) -> list[dict]:
    """Our runs as a copy of the study's valid ones (not simrd's); `change(point)` may give
    another record, or None to leave the point out."""
    rows = []
    for point in published.valid:
        if point.policy == study_names().simrd_policy:
            continue
        row = change(point) if change else record(point)
        if row is not None:
            rows.append(row)
    return rows


def timeouts_to_oom(point: PublishedRun) -> dict:
    return record(point, "oom" if point.status == "timeout" else None)


def find(published: Published, run_id: str) -> PublishedRun:
    return next(p for p in published.points if p.run_id == run_id)


@pytest.fixture(scope="module")
def resolved_paper(published: Published) -> comparison.Paper:
    return comparison.compare(ours_from(published, timeouts_to_oom), published)


# --- the transcription and the rules ---------------------------------------------------------


def test_the_transcription_holds_the_papers_counts(published: Published) -> None:
    evidence = [p for p in published.points if not p.run_id.startswith("resnet32_dev")]
    valid = [p for p in evidence if p.valid]
    assert (len(evidence), len(valid)) == (6243, 5583)
    assert sum(p.status == "timeout" for p in valid) == 417
    assert len(published.points) - len(evidence) == 216
    assert (len(published.final), len(published.table1)) == (42, 7)


def test_the_rules_reproduce_every_published_cell_of_the_final_table(
    published: Published, study: list[Sample]
) -> None:
    computed = rules.final_table(study)
    assert [r.label for r in computed] == [r.label for r in published.final]
    checked = 0
    for mine, theirs in zip(computed, published.final, strict=True):
        for name, kind in FINAL_KINDS.items():
            cell = render(kind, getattr(theirs, name))
            if cell:
                assert render(kind, getattr(mine, name)) == cell, (mine.label, name)
                checked += 1
    assert checked == 387  # 252 cells of the frozen rows, 135 of the baselines lines


def test_the_rules_reproduce_the_verdicts_on_the_policies(study: list[Sample]) -> None:
    """NbhdPenalty H1 and H2 on 2 of 6 traces, TwoPhase on none; the added baselines (stated
    as descriptive): HEStar 0 of 6, CostStale 1 of 6, TControlInspired 5 of 6."""
    both = {}
    for row in rules.final_table(study):
        key = (row.group, row.policy)
        both[key] = both.get(key, 0) + (row.h1 == row.h2 == "pass")
    assert both[("frozen", "nbhd-penalty")] == 2 and both[("frozen", "two-phase")] == 0
    assert [both[("baselines", p)] for p in ("he-star", "cost-stale", "tcontrol-inspired")] == [
        0,
        1,
        5,
    ]


def test_the_rules_reproduce_table_1(published: Published, study: list[Sample]) -> None:
    expected = tuple(dataclasses.replace(r, note="") for r in published.table1)
    assert rules.table1(study) == expected


def test_a_confirmation_point_needs_three_runs_two_resolved_and_agreeing() -> None:
    def runs(ratio: float, *outcomes: str) -> list[Sample]:
        return [
            Sample(stage="D", trace="t", policy="dtr", ratio=ratio, budget=1, repeat=i, outcome=o)
            for i, o in enumerate(outcomes)
        ]

    samples = (
        runs(0.1, "oom", "oom", "timeout") + runs(0.2, "oom", "oom") + runs(0.3, "ok", "oom", "ok")
    )
    assert rules.confirmations(samples) == {0.1: "oom"}


def test_lists_are_written_as_the_study_writes_them() -> None:
    assert span([0.3, 0.29]) == "0.29;0.3"
    assert span([0.2, 0.11, 0.15, 0.15]) == "0.11-0.2"
    assert span([]) is None


# --- compare ---------------------------------------------------------------------------------


def test_our_copy_with_every_timeout_resolved_agrees_and_explains_every_cell(
    resolved_paper: comparison.Paper,
) -> None:
    verdicts = {p.verdict for p in resolved_paper.points}
    assert verdicts == {"agree", "resolved", "not compared"}
    assert sum(p.verdict == "resolved" for p in resolved_paper.points) == 415  # 2 were simrd's
    differing = [c for c in resolved_paper.cells if c.verdict == "differs"]
    assert differing and all(c.why.startswith("explained by resolved timeouts") for c in differing)
    assert resolved_paper.ok
    assert resolved_paper.verdict.startswith("5,360 of 5,360 resolved outcomes agree; 415 of 415")
    assert resolved_paper.excluded == 660


def test_an_identical_copy_reproduces_both_tables(published: Published) -> None:
    result = comparison.compare(pd.DataFrame(ours_from(published)), published)
    assert result.ok and {c.verdict for c in result.cells} == {"equal", "not published"}
    assert "Table 1: 7 of 7 regions reproduced; final table: 42 of 42 rows equal" in result.verdict


def test_a_different_outcome_is_listed_and_fails_the_comparison(
    published: Published,
) -> None:
    flipped = find(published, "protocol_A.jsonl:1")  # densenet121 DTR 0.6 ok

    def change(point: PublishedRun) -> dict:
        return record(point, "oom") if point is flipped else record(point)

    result = comparison.compare(ours_from(published, change), published)
    (wrong,) = [p for p in result.points if p.verdict == "differs"]
    assert (wrong.run_id, wrong.ours) == ("protocol_A.jsonl:1", "oom")
    assert not result.ok and "1 points DIFFER" in result.verdict
    assert "| protocol_A.jsonl:1 |" in output.render_markdown(result)
    unexplained = [c for c in result.cells if c.why.startswith("ERROR")]
    assert unexplained and "UNEXPLAINED" in result.verdict


def test_an_overhead_one_bit_off_differs(published: Published) -> None:
    changed = find(published, "protocol_A.jsonl:2")
    off = math.nextafter(float(changed.overhead), math.inf)

    def change(point: PublishedRun) -> dict:
        return record(point, overhead=off) if point is changed else record(point)

    result = comparison.compare(ours_from(published, change), published)
    (wrong,) = [p for p in result.points if p.verdict == "differs"]
    assert wrong.run_id == "protocol_A.jsonl:2" and repr(off) in wrong.detail
    assert not result.ok


def test_a_resolved_timeout_that_changes_cells_explains_them(published: Published) -> None:
    timeout = find(published, "protocol_A.jsonl:1379")
    assert (timeout.trace, timeout.policy, timeout.ratio, timeout.status) == (
        "unroll_gan",
        "dtr",
        "0.23",
        "timeout",
    )

    def change(point: PublishedRun) -> dict:
        return record(point, "ok", 1.5) if point is timeout else record(point)

    result = comparison.compare(ours_from(published, change), published)
    (resolved,) = [p for p in result.points if p.verdict == "resolved"]
    assert resolved.run_id == timeout.run_id and resolved.detail == "to ok"
    cell = next(
        c for c in result.cells if c.row == "baselines unroll_gan dtr" and c.column == "first_ok"
    )
    assert (cell.published, cell.ours, cell.verdict) == ("0.24", "0.23", "differs")
    assert cell.why == "explained by resolved timeouts: dtr ok at 0.23"
    assert result.ok


def test_extra_runs_where_the_study_excluded_its_own_explain_a_cell(
    published: Published,
) -> None:
    """Unrolled GAN's region: ours resolves the study's timeouts at 0.238 and also has the
    third repeats the study lost to interruptions, so the region is confirmed here."""
    lost = [find(published, f"confirmation_20260929/results.jsonl:{line}") for line in (31, 35)]
    rows = ours_from(published, timeouts_to_oom) + [record(p, "oom") for p in lost]
    result = comparison.compare(rows, published)
    status = next(
        c for c in result.cells if c.row == "unroll_gan 0.236…0.239" and c.column == "status"
    )
    assert (status.published, status.ours) == ("not confirmed", "confirmed")
    assert status.why.startswith("explained by resolved timeouts and the extra points ours ran")
    assert "the study's run was excluded: interrupted" in status.why
    assert result.ok and len(result.extra) == 2


def test_a_missing_point_is_reported(published: Published) -> None:
    gone = find(published, "protocol_B.jsonl:1")

    def change(point: PublishedRun) -> dict | None:
        return None if point is gone else record(point)

    result = comparison.compare(ours_from(published, change), published)
    (missing,) = [p for p in result.points if p.verdict == "missing"]
    assert missing.run_id == gone.run_id
    assert not result.ok and "1 points MISSING" in result.verdict


def test_simrd_points_are_compared_once_a_source_is_given(published: Published) -> None:
    simrd = {
        p.sample.key: record(p)
        for p in published.valid
        if p.policy == study_names().simrd_policy and p.status != TIMEOUT
    }
    result = comparison.compare(ours_from(published), published, simrd=simrd)
    verdicts = {p.verdict for p in result.points if p.policy == study_names().simrd_policy}
    assert verdicts == {"agree", "resolved"}  # two laptop timeouts the cloud reruns resolved
    assert "simrd points not compared" not in result.verdict and result.ok


def test_the_cross_checks_simrd_answers_are_the_studys_simrd_points(
    published: Published,
) -> None:
    # The cross-check replays DTR's run at each budget where the study ran simrd; its table's
    # rows give simrd's answers, which stand beside the study's simrd runs.
    points = [p for p in published.valid if p.policy == study_names().simrd_policy]
    checked = [
        {
            "trace": p.trace,
            "policy": "dtr",
            "budget": p.budget,
            "simrd_outcome": "oom" if p.status == "timeout" else p.status,
            "simrd_overhead": float(p.overhead) if p.overhead else None,
        }
        for p in points
    ]
    keys = dict.fromkeys((p.trace, "dtr", p.budget) for p in points)
    assert simrd_points(published) == list(keys)
    assert comparison.simrd_runs(published, []) is None  # no source: not compared
    result = comparison.compare(
        ours_from(published), published, comparison.simrd_runs(published, checked)
    )
    verdicts = {p.verdict for p in result.points if p.policy == study_names().simrd_policy}
    assert verdicts == {"agree", "resolved"} and result.ok
    wrong = [{**c, "simrd_outcome": "ok", "simrd_overhead": 1.5} for c in checked]
    result = comparison.compare(
        ours_from(published), published, comparison.simrd_runs(published, wrong)
    )
    assert not result.ok and any(p.verdict == "differs" for p in result.points)


# --- output ----------------------------------------------------------------------------------


def test_the_markdown_opens_with_the_verdict(resolved_paper: comparison.Paper) -> None:
    text = output.render_markdown(resolved_paper)
    assert text.splitlines()[0] == resolved_paper.verdict
    assert text == output.render_markdown(resolved_paper)  # deterministic


def test_the_table_round_trips_through_parquet(resolved_paper: comparison.Paper, tmp_path) -> None:
    table = output.table(resolved_paper)
    pq.write_table(table, tmp_path / "paper.parquet")
    back = pq.read_table(tmp_path / "paper.parquet")
    assert back.schema.equals(output.SCHEMA) and back.equals(table)
    kinds = set(back.column("kind").to_pylist())
    assert kinds == {"point", "final", "table1"}
    assert back.num_rows == len(resolved_paper.points) + len(resolved_paper.cells)


def test_a_partial_run_is_compared_with_the_series_it_ran(published: Published) -> None:
    # U-Net's DTR series only, as the quick configuration runs it: its points, its two final
    # rows and its Table 1 regions are compared, nothing of the traces and policies not run.
    unet = [
        r
        for r in ours_from(published, timeouts_to_oom)
        if (r["trace"], r["policy"]) == ("unet", "dtr")
    ]
    result = comparison.reproduce(unet, published)
    assert result.ok, result.verdict
    assert {(p.trace, p.policy) for p in result.points} == {("unet", "dtr"), ("unet", "simrd")}
    assert {c.row for c in result.cells if c.table == "final"} == {
        "frozen unet dtr",
        "baselines unet dtr",
    }
    assert "Table 1: 2 of 2 regions reproduced" in result.verdict
    # A point lost from a series that ran is still missing.
    result = comparison.reproduce([r for r in unet if r["ratio"] != 0.424], published)
    assert not result.ok and "points MISSING" in result.verdict
