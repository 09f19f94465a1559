"""The results layout: the rules' patterns, paths under a results directory, and their parsing."""

from __future__ import annotations

from pathlib import Path

from dtrholes import layout


def test_with_no_arguments_a_path_is_the_rules_pattern() -> None:
    assert layout.sweep_job() == "results/stage_{stage}/{trace}/{policy}/job{job}.json"
    assert layout.series(layout.EDGES) == "results/edges/{trace}/{policy}.json"
    assert layout.series(layout.EXPLANATIONS) == "results/explain/{trace}/{policy}"
    assert layout.map_chunk() == "results/maps/{trace}/{policy}/{first}-{last}.parquet"
    assert layout.log("baseline/{trace}") == "results/logs/baseline/{trace}.log"


def test_a_path_under_a_path_root_is_a_path() -> None:
    root = Path("/tmp/run/results")
    found = layout.sweep_job(layout.STAGE_B, "unet", "dtr", 3, root)
    assert found == root / "stage_b" / "unet" / "dtr" / "job3.json"
    assert layout.table("holes", "md", root) == root / "tables" / "holes.md"
    assert layout.figure("zoom", "unet", "dtr") == "results/figures/zoom-unet-dtr"


def test_a_job_outputs_path_names_its_records() -> None:
    for path, kind, stage in (
        (layout.sweep_job("DEV", "resnet32", "dtr", 0, root=""), layout.SAMPLES, "DEV"),
        (layout.series(layout.REPEATS, "resnet32", "dtr", root=""), layout.REPEATS, "repeat"),
        (layout.merged_map("resnet32", "dtr", root=""), layout.MAPS, "map"),
    ):
        assert layout.listing(path) == (kind, stage, "resnet32", "dtr")
    assert layout.JOB_GLOBS == ("stage_*/*/*/job*.json", "edges/*/*.json", "repeats/*/*.json")


def test_stage_b_comes_after_the_stages_it_refines() -> None:
    params = {"points": {"DEV": {}}}
    assert layout.stages(params) == ("A", "C", "B", "DEV")
    assert layout.planned(params) == ("A", "C", "DEV")
