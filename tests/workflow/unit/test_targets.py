"""The pipeline's target lists, computed without Snakemake: what the dry runs of the shipped
configurations list."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from dtrholes.core import paths
from dtrholes.holes.maps import Span
from dtrholes.pipeline import targets
from dtrholes.report.paper.published import PUBLISHED, study_names
from dtrholes.study import settings

REPO = Path(__file__).resolve().parents[3]
NO_INTERVALS: targets.Intervals = lambda trace: []  # noqa: E731 (Stage B refines nothing)


def run(*configs: str) -> targets.Targets:
    """The targets of `snakemake --configfile config/<name>.yaml ...` (relative paths, as the
    rules see them)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for name in configs:
        config |= yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())
    names = study_names()
    return targets.of(settings.load(config), config, names.figure1_traces, names.figure1_policy)


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def jobs_by_stage(found: list[str]) -> Counter:
    return Counter(paths.listing(p.removeprefix(paths.RESULTS + "/")).stage for p in found)


def test_the_quick_run_makes_what_its_dry_run_lists() -> None:
    quick = run("quick")
    version = quick.settings.protocol.version
    assert quick.all_outputs() == [
        "results/records.parquet",
        "results/tables/holes.md",
        "results/tables/comparison.md",
        "results/tables/crosscheck.md",
        "results/tables/paper.md",
        "results/audit/audit.md",
        f"results/protocol/{version}.json",
        "results/figures/cliffs-resnet32.pdf",
        "results/figures/cliffs-unet.pdf",
        "results/figures/overhead-resnet32.pdf",
        "results/figures/overhead-unet.pdf",
        "results/figures/zoom-resnet32-dtr.pdf",
        "results/figures/zoom-unet-dtr.pdf",
        "results/figures/figure1-dtr.pdf",
        "results/explain/resnet32/dtr",
        "results/explain/unet/dtr",
    ]
    # The dry run lists all but the jobs that wait for U-Net's refinement plan (Stage F's, read
    # by nothing else than U-Net's series).
    assert quick.sampled_outputs(NO_INTERVALS) == [
        "results/stage_dev/resnet32/dtr/job0.json",
        "results/stage_dev/resnet32/dtr/job1.json",
        "results/stage_dev/resnet32/dtr/job2.json",
        "results/stage_a/unet/dtr/job0.json",
        "results/stage_c/unet/dtr/job0.json",
        "results/stage_f/unet/dtr/job0.json",
    ]
    assert quick.unrefined_outputs("unet") == [
        "results/stage_a/unet/dtr/job0.json",
        "results/stage_c/unet/dtr/job0.json",
    ]
    assert quick.series_outputs(paths.EDGES) == [
        "results/edges/resnet32/dtr.json",
        "results/edges/unet/dtr.json",
    ]
    assert quick.figure1_baselines() == [
        "results/baselines/resnet32.json",
        "results/baselines/unet.json",
    ]
    assert quick.study_tables() == ["protocol/published/evidence.csv"]
    assert quick.map_targets() == quick.noise_targets() == []


def test_stage_b_asks_for_the_refinement_plan_of_its_traces_only() -> None:
    quick = run("quick")
    with pytest.raises(ValueError, match="refinement plan"):
        quick.sampled_outputs()
    asked = []

    def refined(trace: str) -> list[list[float]]:
        asked.append(trace)
        return [[0.1, 0.11], [0.2, 0.21]]

    assert quick.stage_outputs("B", "unet", "dtr", refined) == [
        "results/stage_b/unet/dtr/job0.json"
    ]
    assert quick.job_points("b", "unet", "dtr", 0, refined).startswith("0.101:0,0.102:0,")
    assert quick.sampled_outputs(refined, ["resnet32"]) and asked == ["unet", "unet"]


def test_the_default_run_makes_what_its_dry_run_lists() -> None:
    default = run()
    found = default.all_outputs()
    kinds = Counter(
        p.split("/")[1] if "figures" not in p else p.split("/")[2].split("-")[0] for p in found
    )
    assert len(found) == 110 and kinds["explain"] == 43 and kinds["zoom"] == 43
    assert kinds["cliffs"] == kinds["overhead"] == 8 and kinds["figure1"] == 1
    assert len(default.series) == 43  # six traces x six policies, ResNet-32 DTR, LSTM x six
    # The dry run lists A, C and DEV (and F on a policy Stage B does not refine); D, E and the
    # rest of F wait in it for the refinement plans of their traces' series.
    sampled = default.sampled_outputs(NO_INTERVALS)
    assert jobs_by_stage(sampled) == {"A": 36, "C": 18, "DEV": 9, "D": 1, "E": 1, "F": 3}
    assert len(default.ranking("unet", "tcontrol-inspired")) == 1
    assert default.ranking("unet", "dtr") == []


def test_the_broad_and_the_map_runs_add_what_their_dry_runs_list() -> None:
    broad = run("broad")
    assert len(broad.all_outputs()) == 120
    # every series waits for a refinement plan: the dry run lists the sweeps of A and C alone
    found = jobs_by_stage(broad.sampled_outputs(NO_INTERVALS))
    assert found == {"A": 48, "C": 48, "DEV": 9, "D": 1, "E": 1, "F": 3}
    mapped = run("maps")
    assert len(mapped.all_outputs()) == 117 and len(mapped.map_outputs()) == 36
    assert mapped.map_targets() == [
        "results/tables/maps.md",
        *(f"results/figures/maps-{t}.pdf" for t in mapped.params.traces.confirmatory),
    ]


def test_the_cost_noise_run_tabulates_its_perturbed_maps() -> None:
    noisy = run("cost-noise")
    assert noisy.noise_targets() == ["results/tables/noise.md", "results/figures/noise.pdf"]
    assert len(noisy.noise_maps()) == 62 and set(noisy.noise_maps()) <= set(noisy.map_outputs())


def test_a_map_plan_made_from_other_series_is_stale() -> None:
    planned = {"jobs": ["a.json"], "policies": {"dtr": {"ranges": [[0, 9], [20, 29]]}}}
    assert targets.map_ranges(planned, ["a.json"], "dtr") == [Span(0, 9), Span(20, 29)]
    assert targets.map_ranges(planned, ["a.json", "b.json"], "dtr") is None
    assert targets.map_ranges(planned, ["a.json"], "lru") is None
    ranges = [Span(0, 9), Span(20, 29)]
    chunks = targets.map_chunks("t", "dtr", ranges, 2)
    assert chunks == [paths.map_chunk("t", "dtr", *s) for s in ((0, 4), (5, 9), (20, 24), (25, 29))]
    assert [targets.chunk_index(ranges, 2, *s) for s in ((5, 9), (20, 24), (1, 2))] == [1, 0, 0]


def test_the_small_glue() -> None:
    assert targets.intervals({"intervals": [{"low": 0.1, "high": 0.11, "study": True}]}) == [
        [0.1, 0.11]
    ]
    assert targets.option("--baseline", ["a", "b"]) == "--baseline a --baseline b"
    assert targets.option("--simrd", [None]) == targets.option("--study", []) == ""
    order = ["lstm", "unet"]
    assert [targets.priority(order, t) for t in ("lstm", "unet", "resnet32")] == [2, 1, 0]
    assert len(targets.published_files(PUBLISHED)) >= 1
