"""The results layout: the rules' patterns, paths under a results directory, and their parsing."""

from __future__ import annotations

import re
from pathlib import Path

from dtrholes.core import paths


def test_with_no_arguments_a_path_is_the_rules_pattern() -> None:
    assert paths.sweep_job() == "results/stage_{stage}/{trace}/{policy}/job{job}.json"
    assert paths.series(paths.EDGES) == "results/edges/{trace}/{policy}.json"
    assert paths.series(paths.EXPLANATIONS) == "results/explain/{trace}/{policy}"
    assert paths.map_chunk() == "results/maps/{trace}/{policy}/{first}-{last}.parquet"
    assert paths.log("baseline/{trace}") == "results/logs/baseline/{trace}.log"


def test_a_path_under_a_path_root_is_a_path() -> None:
    root = Path("/tmp/run/results")
    found = paths.sweep_job(paths.STAGE_B, "unet", "dtr", 3, root)
    assert found == root / "stage_b" / "unet" / "dtr" / "job3.json"
    assert paths.table("holes", "md", root) == root / "tables" / "holes.md"
    assert paths.figure("zoom", "unet", "dtr") == "results/figures/zoom-unet-dtr"


def test_a_job_outputs_path_names_its_records() -> None:
    for path, kind, stage in (
        (paths.sweep_job("DEV", "resnet32", "dtr", 0, root=""), paths.SAMPLES, "DEV"),
        (paths.series(paths.REPEATS, "resnet32", "dtr", root=""), paths.REPEATS, "repeat"),
        (paths.merged_map("resnet32", "dtr", root=""), paths.MAPS, "map"),
    ):
        assert paths.listing(path) == (kind, stage, "resnet32", "dtr")
    assert paths.JOB_GLOBS == ("stage_*/*/*/job*.json", "edges/*/*.json", "repeats/*/*.json")


def test_stage_b_comes_after_the_stages_it_refines() -> None:
    assert paths.stages(["DEV"]) == ("A", "C", "B", "DEV")
    assert paths.planned(["DEV"]) == ("A", "C", "DEV")
    assert paths.stages() == paths.SAMPLED


def test_the_rules_pass_the_results_directory_the_paths_module_roots() -> None:
    """The rules' shell commands name the results directory itself (`--results results`,
    `audit results`): a name in the command's text, since Snakemake reruns a rule whose command
    text changes; every other path under it comes from dtrholes.core.paths."""
    rules = Path(__file__).resolve().parents[3] / "workflow" / "rules"
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(rules.glob("*.smk")))
    named = re.findall(r"(?:--results|DTR_HOLES\} audit) ([\w/]+)", text)
    assert len(named) >= 10 and set(named) == {paths.RESULTS}
    assert re.findall(r"""["' ]results/""", text) == []  # no path under it spelled out
