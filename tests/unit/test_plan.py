"""Planning of protocol stages: the ratio grid, seeded repeats, and the split into jobs."""

from __future__ import annotations

from pathlib import Path

from dtrholes import plan, protocol

REPO = Path(__file__).resolve().parents[2]
PARAMS = protocol.load(REPO / "protocol").parameters


def test_study_grid_has_56_ratios_equal_to_their_decimal_literals() -> None:
    ratios = plan.grid(0.05, 0.60, 0.01)
    assert len(ratios) == 56
    assert ratios == [float(f"0.{i:02d}") for i in range(5, 61)]


def test_stage_a_repeats_a_seeded_tenth_three_times() -> None:
    points = plan.stage_a_points(PARAMS, "resnet32")
    repeated = {p.ratio for p in points if p.repeat > 0}
    assert len(repeated) == 6  # ceil(10% of 56)
    assert len(points) == 56 + 2 * 6
    assert plan.stage_a_points(PARAMS, "resnet32") == points
    assert {p.ratio for p in plan.stage_a_points(PARAMS, "unet") if p.repeat} != repeated


def test_jobs_split_every_point_once() -> None:
    points = [plan.Point(r, 0) for r in plan.grid(0.1, 0.2, 0.01)]
    jobs = plan.job_count(points, 4)
    assert jobs == 3
    assert [p for j in range(jobs) for p in plan.job_points(points, 4, j)] == points


def test_stage_c_samples_inside_every_interval_on_the_fine_grid() -> None:
    points = plan.stage_c_points(PARAMS, trace_index=3)
    assert len(points) == 2 * 25 + 30  # two per interval below 0.30, one from 0.30 up
    grid_a = plan.grid(0.05, 0.60, 0.01)
    for p in points:
        assert p.ratio not in grid_a and 0.05 < p.ratio < 0.60
        assert abs(p.ratio * 10_000 - round(p.ratio * 10_000)) < 1e-6
    assert len({p.ratio for p in points}) == len(points)
    assert plan.stage_c_points(PARAMS, 3) == points != plan.stage_c_points(PARAMS, 4)


def test_the_study_pairs_are_stage_c_samples() -> None:
    # Seed 20260927 + the trace's index in the trace sheet gives the study's interior sample
    # where InceptionV4 (index 1) completes, 0.2343.
    inception = {p.ratio for p in plan.stage_c_points(PARAMS, 1)}
    assert 0.2343 in inception


def sample(policy: str, stage: str, ratio: float, outcome: str, overhead=None) -> plan.Sample:
    return plan.Sample(policy, stage, ratio, outcome, overhead)


def test_refinement_triggers() -> None:
    params = {
        "stage_a": {"ratios": {"start": 0.1, "stop": 0.14, "step": 0.01}},
        "stage_b": {"triggers": ["status", "overhead", "stage_c"], "overhead_change": 0.25},
    }
    samples = [
        sample("dtr", "A", 0.10, "oom"),
        sample("dtr", "A", 0.11, "ok", 2.0),
        sample("dtr", "A", 0.12, "ok", 2.6),  # +30%: overhead trigger
        sample("dtr", "A", 0.13, "ok", 2.7),
        sample("dtr", "A", 0.14, "ok", 2.7),
        sample("dtr", "C", 0.1355, "thrashed"),  # differs from both ends
        sample("lru", "A", 0.12, "ok", 1.0),
        sample("lru", "A", 0.13, "oom"),  # another policy's status change
        sample("lru", "C", 0.1155, "oom"),  # no lru sample at 0.11: no interval there
    ]
    found = plan.refine_intervals(params, samples)
    assert found == [
        {"low": 0.1, "high": 0.11, "triggers": ["status"]},
        {"low": 0.11, "high": 0.12, "triggers": ["overhead"]},
        {"low": 0.12, "high": 0.13, "triggers": ["status"]},
        {"low": 0.13, "high": 0.14, "triggers": ["stage_c"]},
    ]
    params["stage_b"]["triggers"] = ["status"]
    assert [i["low"] for i in plan.refine_intervals(params, samples)] == [0.1, 0.12]
    params["stage_b"] |= {"triggers": ["overhead"], "overhead_change": 0.35}
    assert plan.refine_intervals(params, samples) == []


def test_stage_b_points_are_the_fine_grid_strictly_inside() -> None:
    params = {"stage_b": {"step": 0.001}}
    points = plan.stage_b_points(params, [[0.1, 0.11], [0.2, 0.21]])
    assert [p.ratio for p in points][:3] == [0.101, 0.102, 0.103] and len(points) == 18


def test_job_specs_hold_only_what_the_job_reads() -> None:
    current = protocol.load(REPO / "protocol")
    spec = plan.job_spec(current, "A", "dtr")
    assert set(spec["values"]) == {"stage_a", "limits", "policies/dtr"}
    assert spec["amendments"] == []
    spec = plan.job_spec(current, "C", "tcontrol-inspired")
    assert spec["amendments"] == [
        "2026-09-26-stage-c-interior-samples",
        "2026-09-26-tcontrol-inspired",
    ]
    params = plan.parameters(spec)
    assert params["policies"]["tcontrol-inspired"]["alpha"] == 0.3
    assert params["stage_a"]["ratios"]["step"] == 0.01 and "repeats" not in params["stage_a"]
