"""The protocol's typed parameters: the validated dict's values read through attributes."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
from pathlib import Path

import pytest

from dtrholes.core import paths
from dtrholes.holes import edges
from dtrholes.study import plan, protocol
from dtrholes.study.parameters import Edges, Grid, Parameters, PointSet

REPO = Path(__file__).resolve().parents[3]
CURRENT = protocol.load(REPO / "protocol")
PARAMS = CURRENT.params


def test_the_typed_parameters_hold_the_protocols_values() -> None:
    raw = CURRENT.parameters
    assert PARAMS.traces.confirmatory == tuple(raw["traces"]["confirmatory"])
    assert PARAMS.traces.every == ("resnet32", "lstm", *raw["traces"]["confirmatory"])
    assert list(PARAMS.policies) == list(raw["policies"])
    assert PARAMS.policies["tcontrol-inspired"].values == {
        "alpha": 0.3,
        "floor": 0.01,
        "seed": 20260926,
    }
    assert PARAMS.policy_ref("dtr") == "dtr" and PARAMS.policy_values("nbhd-penalty") == {"b": 0.25}
    assert PARAMS.frozen == ("dtr", "nbhd-penalty", "two-phase")
    assert (PARAMS.limits.overhead_cap, PARAMS.limits.wall_clock_s) == (60, 1200)
    assert PARAMS.stage_a.ratios == Grid(0.05, 0.60, 0.01) and PARAMS.stage_a.repeats.count == 3
    assert PARAMS.stage_b.triggers == ("status", "overhead", "stage_c")
    assert PARAMS.stage_b.study == "published/evidence.csv"
    assert PARAMS.stage_c.step == 0.0001 and PARAMS.stage_c.seed == 20260927
    assert list(PARAMS.points) == list(raw["points"]) == ["DEV", "D", "E", "F"]
    assert PARAMS.points["DEV"][1] == PointSet("lstm", "all", (0.262, 0.264, 0.265, 0.266), (0,))
    assert PARAMS.confirmation.simrd == ("dtr",) and PARAMS.confirmation.points == "brackets"
    assert PARAMS.edges == Edges(200, 0.25, 2, 2, True)
    assert (PARAMS.explain.top, PARAMS.explain.decisions) == (5, 200)
    assert PARAMS.maps.whole_range_cap == 5000


def test_building_them_changes_no_version_and_no_job_spec() -> None:
    raw = copy.deepcopy(CURRENT.parameters)
    Parameters.from_dict(CURRENT.parameters)
    assert CURRENT.parameters == raw and CURRENT.version == "9e1ca1a8f077"
    kinds = [*plan.READS, *paths.stages(PARAMS.points)]
    for kind in kinds:
        for policy in PARAMS.policies:
            spec = plan.job_spec(CURRENT, kind, policy)
            text = json.dumps(spec, sort_keys=True)
            params = plan.parameters(json.loads(text))
            assert json.dumps(spec, sort_keys=True) == text
            assert params.policies[policy] == PARAMS.policies[policy]


def test_a_jobs_slice_leaves_what_it_does_not_read_none() -> None:
    params = plan.parameters(plan.job_spec(CURRENT, "refine"))
    assert params.frozen == PARAMS.frozen and params.stage_a.ratios == PARAMS.stage_a.ratios
    assert params.stage_a.repeats is None and params.stage_b.step is None
    assert params.stage_b.triggers == PARAMS.stage_b.triggers
    assert params.limits is None and params.maps is None and dict(params.policies) == {}
    stage_d = plan.parameters(plan.job_spec(CURRENT, "D", "dtr"))
    assert list(stage_d.points) == ["D"] and stage_d.points["D"] == PARAMS.points["D"]
    # a value the protocol lacks is None in the spec, and absent here
    assert Parameters.from_dict({"stage_b": {"study": None}}).stage_b.study is None


def test_omitted_edge_options_are_exact_edges_defaults() -> None:
    defaults = inspect.signature(edges.exact_edge).parameters
    for option in dataclasses.fields(Edges):
        assert option.default == defaults[option.name].default, option.name
    assert Edges.from_dict({"max_runs": 200}) == Edges(max_runs=200)


def test_they_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PARAMS.limits.overhead_cap = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        PARAMS.policies["lru"] = PARAMS.policies["dtr"]  # type: ignore[index]
