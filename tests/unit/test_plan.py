"""Planning of protocol stages: the ratio grid, seeded repeats, and the split into jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dtrholes import plan
from simulator import UserError

REPO = Path(__file__).resolve().parents[2]


def test_study_grid_has_56_ratios_equal_to_their_decimal_literals() -> None:
    ratios = plan.grid(0.05, 0.60, 0.01)
    assert len(ratios) == 56
    assert ratios == [float(f"0.{i:02d}") for i in range(5, 61)]


def test_stage_a_repeats_a_seeded_tenth_three_times() -> None:
    protocol = plan.read_protocol(REPO / "protocol" / "base.yaml")
    points = plan.stage_a_points(protocol, "resnet32")
    repeated = {p.ratio for p in points if p.repeat > 0}
    assert len(repeated) == 6  # ceil(10% of 56)
    assert len(points) == 56 + 2 * 6
    assert plan.stage_a_points(protocol, "resnet32") == points
    assert {p.ratio for p in plan.stage_a_points(protocol, "unet") if p.repeat} != repeated


def test_jobs_split_every_point_once() -> None:
    points = [plan.Point(r, 0) for r in plan.grid(0.1, 0.2, 0.01)]
    jobs = plan.job_count(points, 4)
    assert jobs == 3
    assert [p for j in range(jobs) for p in plan.job_points(points, 4, j)] == points


def test_unreadable_protocol_is_one_user_error(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("a: [unclosed")
    with pytest.raises(UserError, match="p.yaml"):
        plan.read_protocol(tmp_path / "p.yaml")
    (tmp_path / "q.yaml").write_text("- just a list")
    with pytest.raises(UserError, match="a mapping"):
        plan.read_protocol(tmp_path / "q.yaml")


def test_stage_c_samples_inside_every_interval_on_the_fine_grid() -> None:
    protocol = plan.read_protocol(REPO / "protocol" / "base.yaml")
    points = plan.stage_c_points(protocol, trace_index=3)
    assert len(points) == 2 * 25 + 30  # two per interval below 0.30, one from 0.30 up
    grid_a = plan.grid(0.05, 0.60, 0.01)
    for p in points:
        assert p.ratio not in grid_a and 0.05 < p.ratio < 0.60
        assert abs(p.ratio * 10_000 - round(p.ratio * 10_000)) < 1e-6
    assert len({p.ratio for p in points}) == len(points)
    assert plan.stage_c_points(protocol, 3) == points != plan.stage_c_points(protocol, 4)
