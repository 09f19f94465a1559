"""Planning of protocol stages: the ratio grid, seeded repeats, and the split into jobs."""

from __future__ import annotations

import csv
from pathlib import Path

from dtrholes.core.samples import Sample
from dtrholes.pipeline import stages
from dtrholes.study import plan, protocol
from dtrholes.study.parameters import Parameters

REPO = Path(__file__).resolve().parents[3]
PARAMS = protocol.load(REPO / "protocol").params


def test_study_grid_has_56_ratios_equal_to_their_decimal_literals() -> None:
    ratios = plan.grid(0.05, 0.60, 0.01)
    assert len(ratios) == 56
    assert ratios == [float(f"0.{i:02d}") for i in range(5, 61)]


STUDY = Path(__file__).resolve().parents[3] / "protocol" / "published" / "evidence.csv"


def _study_ratios(trace: str, stage: str) -> set[tuple[float, int]]:
    """The (ratio, repeat) points the study ran with DTR in a stage, from its evidence table."""
    with STUDY.open(newline="", encoding="utf-8") as f:
        return {
            (float(r["ratio"]), int(r["repeat"]))
            for r in csv.DictReader(f)
            if (r["trace"], r["stage"], r["policy"]) == (trace, stage, "dtr")
        }


def test_stage_a_draws_the_studys_repeats_for_all_six_traces() -> None:
    # One generator over the six traces in the study's order: U-Net's repeats depend on the
    # three traces drawn before it.
    for trace in PARAMS.traces.confirmatory:
        points = plan.stage_a_points(PARAMS, trace)
        assert len(points) == 56 + 2 * 6  # round(10% of 56) ratios run three times
        assert {(p.ratio, p.repeat) for p in points} == _study_ratios(trace, "A")
    unet = {p.ratio for p in plan.stage_a_points(PARAMS, "unet") if p.repeat}
    assert unet == {0.08, 0.24, 0.31, 0.49, 0.51, 0.52}


def test_stage_c_draws_the_studys_samples_for_all_six_traces() -> None:
    for trace in PARAMS.traces.confirmatory:
        points = plan.stage_c_points(PARAMS, trace)
        assert {(p.ratio, p.repeat) for p in points} == _study_ratios(trace, "C")
        assert len(points) == (79 if trace == "densenet121" else 80)  # DenseNet draws one twice
    assert 0.2343 in {p.ratio for p in plan.stage_c_points(PARAMS, "inceptionv4")}
    assert 0.4324 in {p.ratio for p in plan.stage_c_points(PARAMS, "unet")}


def test_development_traces_run_stages_a_and_c_only_in_the_broader_sweep() -> None:
    assert plan.stage_a_points(PARAMS, "resnet32") == []
    assert plan.stage_c_points(PARAMS, "resnet32") == []
    assert len(plan.stage_a_points(PARAMS, "resnet32", broad=True)) == 68
    # The six traces keep the study's draws: the development ones are drawn after them.
    assert plan.stage_a_points(PARAMS, "unet", broad=True) == plan.stage_a_points(PARAMS, "unet")
    assert plan.stage_c_points(PARAMS, "unet", broad=True) == plan.stage_c_points(PARAMS, "unet")


def test_baselines_run_the_stage_a_grid_only() -> None:
    assert plan.stage_policies(PARAMS, "A") == list(PARAMS.policies)
    assert plan.stage_policies(PARAMS, "C") == ["dtr", "nbhd-penalty", "two-phase"]
    assert plan.stage_policies(PARAMS, "B") == ["dtr", "nbhd-penalty", "two-phase"]
    assert plan.stage_policies(PARAMS, "C", broad=True) == list(PARAMS.policies)
    assert plan.stage_points(PARAMS, "C", "unet", "he-star") == []
    assert len(plan.stage_points(PARAMS, "A", "unet", "he-star")) == 68


def test_point_stages_are_the_studys_development_and_confirmation_runs() -> None:
    dev = plan.stage_points(PARAMS, "DEV", "resnet32", "dtr")
    assert len(dev) == 71 * 3 and dev[0] == plan.Point(0.08, 0) and dev[-1] == plan.Point(0.15, 2)
    lstm = [p.ratio for p in plan.stage_points(PARAMS, "DEV", "lstm", "he-star")]
    assert lstm == [0.262, 0.264, 0.265, 0.266]
    assert plan.stage_points(PARAMS, "DEV", "resnet32", "he-star") == []
    stage_d = plan.stage_points(PARAMS, "D", "inceptionv4", "dtr")
    assert {(p.ratio, p.repeat) for p in stage_d} == _study_ratios("inceptionv4", "D")
    assert len(stage_d) == 32  # 0.2527 is both a repeated point and in the fine sweep: once
    stage_f = plan.stage_points(PARAMS, "F", "unet", "dtr")
    assert {(p.ratio, p.repeat) for p in stage_f} == _study_ratios("unet", "F-confirm-20260929")


def test_planned_points_cover_every_stage_that_does_not_depend_on_outcomes() -> None:
    planned = plan.planned_points(PARAMS)
    assert {stage for stage, *_ in planned} == {"A", "C", "DEV", "D", "E", "F"}
    assert sum(stage == "A" for stage, *_ in planned) == 6 * 6 * 68  # six traces and policies
    assert sum(stage == "C" for stage, *_ in planned) == 3 * (5 * 80 + 79)  # the frozen three


def test_jobs_split_every_point_once() -> None:
    points = [plan.Point(r, 0) for r in plan.grid(0.1, 0.2, 0.01)]
    jobs = plan.job_count(points, 4)
    assert jobs == 3
    assert [p for j in range(jobs) for p in plan.job_points(points, 4, j)] == points


def sample(policy: str, stage: str, ratio: float, outcome: str, overhead=None) -> Sample:
    return Sample(policy=policy, stage=stage, ratio=ratio, outcome=outcome, overhead=overhead)


def _refining(triggers: list[str], overhead_change: float, stop: float = 0.14) -> Parameters:
    """A protocol slice with what Stage B's trigger reads: the Stage A grid and the trigger."""
    return Parameters.from_dict(
        {
            "stage_a": {"ratios": {"start": 0.1, "stop": stop, "step": 0.01}},
            "stage_b": {"triggers": triggers, "overhead_change": overhead_change},
        }
    )


def test_refinement_triggers() -> None:
    params = _refining(["status", "overhead", "stage_c"], 0.25)
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
        {"low": 0.1, "high": 0.11, "triggers": ["status"], "study": False},
        {"low": 0.11, "high": 0.12, "triggers": ["overhead"], "study": False},
        {"low": 0.12, "high": 0.13, "triggers": ["status"], "study": False},
        {"low": 0.13, "high": 0.14, "triggers": ["stage_c"], "study": False},
    ]
    params = _refining(["status"], 0.25)
    assert [i["low"] for i in plan.refine_intervals(params, samples)] == [0.1, 0.12]
    params = _refining(["overhead"], 0.35)
    assert plan.refine_intervals(params, samples) == []
    # The study's intervals are refined whatever the trigger finds; each names its source.
    found = plan.refine_intervals(params, samples, study=[0.121, 0.1205, 0.139])
    assert found == [
        {"low": 0.12, "high": 0.13, "triggers": [], "study": True},
        {"low": 0.13, "high": 0.14, "triggers": [], "study": True},
    ]


def test_a_timed_out_stage_c_point_never_triggers() -> None:
    params = _refining(["status", "stage_c"], 0.25, stop=0.11)
    ends = [sample("dtr", "A", 0.10, "ok", 1.0), sample("dtr", "A", 0.11, "ok", 1.0)]
    listed = [
        {
            "policy": {"name": "dtr"},
            "stage": "C",
            "ratio": 0.105,
            "status": "timeout",
            "result": None,
        },
    ]
    assert plan.refine_intervals(params, ends + stages.refinement_samples(listed)) == []
    assert plan.refine_intervals(params, [*ends, sample("dtr", "C", 0.105, "oom")])


def test_the_study_refined_58_intervals_with_1566_points() -> None:
    intervals = {
        trace: plan.refine_intervals(PARAMS, [], plan.study_refined(STUDY, trace))
        for trace in PARAMS.traces.confirmatory
    }
    assert sum(map(len, intervals.values())) == 58
    points = [
        p
        for found in intervals.values()
        for p in plan.stage_b_points(PARAMS, [[i["low"], i["high"]] for i in found])
    ]
    assert len(points) * 3 == 1566  # the frozen three policies ran each


def test_stage_b_points_are_the_fine_grid_strictly_inside() -> None:
    params = Parameters.from_dict({"stage_b": {"step": 0.001}})
    points = plan.stage_b_points(params, [[0.1, 0.11], [0.2, 0.21]])
    assert [p.ratio for p in points][:3] == [0.101, 0.102, 0.103] and len(points) == 18


def test_job_specs_hold_only_what_the_job_reads() -> None:
    current = protocol.load(REPO / "protocol")
    spec = plan.job_spec(current, "A", "dtr")
    assert set(spec["values"]) == {"traces", "stage_a", "limits", "policies/dtr"}
    assert spec["amendments"] == []
    spec = plan.job_spec(current, "C", "tcontrol-inspired")
    assert spec["amendments"] == [
        "2026-09-26-stage-c-interior-samples",
        "2026-09-26-tcontrol-inspired",
    ]
    params = plan.parameters(spec)
    assert params.policies["tcontrol-inspired"].values["alpha"] == 0.3
    assert params.stage_a.ratios.step == 0.01 and params.stage_a.repeats is None
    assert params.stage_b is None and params.limits == current.params.limits


def test_an_own_trace_runs_the_broad_samples_seeded_by_its_sha256() -> None:
    one, other = "ab" * 32, "cd" * 32
    a = plan.stage_a_points(PARAMS, "mine", own_sha256=one)
    assert len(a) == 68 and {p.ratio for p in a} == set(plan.grid(0.05, 0.60, 0.01))
    assert a == plan.stage_a_points(PARAMS, "another_name", own_sha256=one)  # the bytes decide
    assert a != plan.stage_a_points(PARAMS, "mine", own_sha256=other)
    c = plan.stage_c_points(PARAMS, "mine", own_sha256=one)
    assert 70 <= len(c) <= 80 and c != plan.stage_c_points(PARAMS, "mine", own_sha256=other)
    # every policy in every sampled stage (as the broader sweep), no fixed points
    for policy in PARAMS.policies:
        assert plan.stage_points(PARAMS, "C", "mine", policy, own_sha256=one) == c
    assert plan.stage_points(PARAMS, "DEV", "resnet32", "dtr", own_sha256=one) == []
    # the study's traces keep their draws
    assert plan.stage_a_points(PARAMS, "unet") == plan.stage_a_points(PARAMS, "unet", True)
    assert plan.stage_a_points(PARAMS, "mine") == []
