"""Pipeline stages on a tiny trace with a hole: exact edges, and repeats that must agree."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dtrholes.pipeline import stages
from dtrholes.study import records, runner
from dtrholes.traces import fetch
from simulator import simulate
from tests.support.tracegen import random_trace_text, tiny_trace

TEXT = random_trace_text(13, 40)  # DTR: fails, completes, fails, then completes for good
SPEC = {
    "values": {
        "limits": {"overhead_cap": 60, "wall_clock_s": 600},
        "policies/dtr": {},
        "edges": {"max_runs": 50},
        "confirmation/repeats": 2,
        "confirmation/points": "region",
    },
    "amendments": [],
}


@pytest.fixture
def job(tmp_path: Path) -> stages.Job:
    log = tmp_path / "tiny.log"
    log.write_text(TEXT)
    trace = tiny_trace(TEXT)
    baseline = {"sha256": trace.sha256, "peak_memory": simulate(trace, 2**62 - 1).peak_memory}
    return stages.Job(
        str(log), "dtr", SPEC, "v1", baseline, tmp_path, fetch.DEFAULT_SHEET, tmp_path / "results"
    )


def sampled(job: stages.Job, step: int = 30) -> list[dict]:
    """Stage A-like samples every `step` bytes from a fifth of the peak."""
    peak = job.baseline["peak_memory"]
    requests = [job.request("A", b, None) for b in range(peak // 5, peak + 1, step)]
    runner.run_requests(requests, job.loader(), job.records, progress=lambda _: None)
    return [records.read_record(records.record_path(job.records, r.run_id)) for r in requests]


def test_edges_are_adjacent_budgets_that_differ_in_feasibility(job: stages.Job) -> None:
    listed = sampled(job)
    lines: list[str] = []
    found, run_ids = stages.find_edges(job, listed, lines.append)
    trace = tiny_trace(TEXT)
    assert len(found) == 3  # up into the hole, out of it, and the first success
    assert [line.split()[0] for line in lines] == ["[1/3]", "[2/3]", "[3/3]"]
    assert all(f"{edge['runs']} runs" in line for edge, line in zip(found, lines, strict=True))
    for edge in found:
        assert edge["resolved"] and edge["above"] == edge["below"] + 1
        below, above = (simulate(trace, b).outcome for b in (edge["below"], edge["above"]))
        assert (below, above) == (edge["outcome_below"], edge["outcome_above"])
        assert (below == "ok") != (above == "ok")
        assert edge["low_sample"] <= edge["below"] < edge["high_sample"]
    again, _ = stages.find_edges(job, listed)  # every bisection run is recorded and reused
    assert again == found and len(set(run_ids)) == len(list(job.records.glob("*.json"))) - len(
        listed
    )


def test_repeats_confirm_a_region_and_report_a_disagreement(job: stages.Job) -> None:
    listed = sampled(job)
    lines: list[str] = []
    regions, run_ids = stages.repeat_regions(job, listed, lines.append)
    (region,) = regions
    assert region["confirmed"] and all(not p["disagree"] for p in region["points"])
    assert len(lines) == 1 and lines[0].startswith("[1/1]") and lines[0].endswith(": confirmed")
    assert [p["outcome"] for p in region["points"]][0] == "ok" == region["points"][-1]["outcome"]
    assert len(run_ids) == 2 * len(region["points"])  # two repeats of every point
    stored = {r["stage"] for r in map(records.read_record, job.records.glob("*.json"))}
    assert "repeat" in stored
    # An original run whose recorded result differs from what its repeats give:
    tampered = json.loads(json.dumps(listed))
    first_fail = region["points"][1]["budget"]
    for record in tampered:
        if record["budget"] == first_fail:
            record["result"]["clock"] += 1
    (region,) = stages.repeat_regions(job, tampered, lines.append)[0]
    assert not region["confirmed"] and lines[-1].endswith(": repeats disagree")
    assert [p["disagree"] for p in region["points"] if p["budget"] == first_fail] == [[1, 2]]


def test_a_point_bracketing_two_regions_is_repeated_and_listed_once(job: stages.Job) -> None:
    listed = sampled(job, step=2)
    (region,), _ = stages.repeat_regions(job, listed)
    inside = [p["budget"] for p in region["points"] if p["outcome"] != "ok"]
    assert len(inside) >= 3
    split = json.loads(json.dumps(listed))  # a completing sample in the middle of the region
    for record in split:
        if record["budget"] == inside[len(inside) // 2]:
            record["result"]["outcome"] = "ok"
    regions, run_ids = stages.repeat_regions(job, split)
    assert len(regions) == 2 and regions[0]["ok_above"] == regions[1]["ok_below"]
    assert len(run_ids) == len(set(run_ids))


def test_job_requests_carry_protocol_labels_outside_the_run_id(job: stages.Job) -> None:
    request = job.request("A", 500, None)
    assert request.protocol_version == "v1" and request.wall_clock_s == 600
    relabelled = dataclasses.replace(job, version="v2").request("A", 500, None)
    assert relabelled.run_id == request.run_id


def test_crosscheck_points_add_the_studys_simrd_budgets_where_dtr_ran_them() -> None:
    def row(budget: int, stage: str = "A") -> dict:
        return {
            "trace": "t",
            "trace_sha256": "s",
            "policy": "dtr",
            "budget": budget,
            "ratio": budget / 100,
            "overhead_cap": 60.0,
            "protocol_version": "v",
            "stage": stage,
            "status": "complete",
            **{k: "ok" if k == "outcome" else 1 for k in ("outcome", "clock", "evictions")},
            "eviction_seq_sha256": "e",
        }

    rows = [row(10), row(20), row(30, "DEV"), row(40, "edge")]
    repeats = {("t", "dtr"): [{"points": [{"budget": 10}, {"budget": 20}]}]}
    study = [("t", "dtr", b) for b in (20, 30, 40)] + [("u", "dtr", 10)]  # 40: an edge probe
    points = stages.crosscheck_points(rows, repeats, ["dtr"], {"t": 100}, study)
    assert [p["budget"] for p in points] == [10, 20, 30]
    assert points[2]["model_compute"] == 100 and points[2]["ours"]["outcome"] == "ok"
