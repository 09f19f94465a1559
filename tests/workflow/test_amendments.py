"""Amending the protocol of a completed tiny scenario reruns exactly the affected jobs."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq

from tests.support.auditing import audit, failures
from tests.support.scenario import copy_of, planned, planned_jobs, planned_outputs, snakemake

SERIES_RULES = (
    "sweep_stage",
    "find_edges",
    "repeat_regions",
    "explain_regions",
    "map_chunk",
    "merge_map",
)
PLAN = "results/stage_b/resnet32/plan.json"
MAP_PLAN = "results/maps/resnet32/plan.json"
AGGREGATES = {
    "audit_results",
    "all",
    "render_protocol",
    "plan_refinement",
    "gather_records",
    "tabulate_holes",
    "compare_policies",
    "compare_paper",
    "crosscheck_simrd",
    "plot_trace",
    "plot_zoom",
    "plot_figure1",
    "plan_maps",
    "tabulate_maps",
    "plot_maps",
}


def amend(directory: Path, slug: str, changes: str, kind: str = "amendment") -> None:
    text = f"""\
date: 2026-11-29
title: {slug}
kind: {kind}
reason: A test amendment.
changes: {changes}
"""
    (directory / "protocol" / "amendments" / f"2026-11-29-{slug}.yaml").write_text(text)


def _updated(reason: str) -> list[str]:
    """The inputs a planned job waits for, from Snakemake's reason for it ([] for another)."""
    prefix = "Input files updated by another job: "
    return reason.removeprefix(prefix).split(", ") if reason.startswith(prefix) else []


def dry_run(directory: Path) -> tuple[dict[str, int], str]:
    output = snakemake(directory, "-n")
    return planned(output), output


def test_an_execution_note_plans_nothing(completed: Path, tmp_path: Path) -> None:
    copy = copy_of(completed, tmp_path)
    amend(copy, "note", "[]", kind="execution-note")
    jobs, output = dry_run(copy)
    assert jobs == {} and "Nothing to be done" in output


def test_adding_a_policy_plans_only_its_jobs_and_the_aggregates(
    completed: Path, tmp_path: Path
) -> None:
    copy = copy_of(completed, tmp_path)
    amend(copy, "add-lru", "[{path: policies/lru, new: {}}]")
    jobs, output = dry_run(copy)
    assert set(jobs) - {"total"} <= AGGREGATES | set(SERIES_RULES)
    assert jobs["sweep_stage"] == 2  # lru: two Stage A chunks (not frozen: Stage A only)
    assert all("/lru/" in path for path in planned_outputs(output, "sweep_stage"))
    for rule in SERIES_RULES[1:]:
        # Other policies' series wait for the trace's new refinement plan, which may give them
        # new Stage B budgets; when it does not, they are not run (below).
        for path, reason in planned_jobs(output, rule).items():
            pending = bool({PLAN, MAP_PLAN} & set(_updated(reason)))
            assert "/lru" in path or pending, (path, reason)
    before = set((copy / "results" / "records").iterdir())
    executed = snakemake(copy)  # once the plan is redone, it reruns only what it must
    for rule in SERIES_RULES:
        assert all("/lru" in path for path in planned_outputs(executed, rule)), rule
    new = set((copy / "results" / "records").iterdir()) - before
    assert {json.loads(p.read_text())["policy"]["name"] for p in new} == {"lru"}
    rendered = sorted((copy / "results" / "protocol").glob("*.json"))
    assert len(rendered) == 2
    holes = pq.read_table(copy / "results" / "tables" / "holes.parquet").to_pylist()
    older = {row["policy"]: row["older_protocol"] for row in holes}
    assert older == {"dtr": True, "nbhd-penalty": True, "lru": False}
    markdown = (copy / "results" / "tables" / "holes.md").read_text()
    assert "| resnet32 † | dtr |" in markdown and "| resnet32 | lru |" in markdown
    lru = next(row for row in holes if row["policy"] == "lru")
    assert lru["amendments"] == "2026-11-29-add-lru"


def test_adding_a_point_stage_plans_its_job_and_what_reads_its_series(
    completed: Path, tmp_path: Path
) -> None:
    copy = copy_of(completed, tmp_path)
    points = "[{trace: resnet32, policies: [dtr], ratios: [0.1035], repeats: [0]}]"
    amend(copy, "stage-e", f"[{{path: points/E, new: {points}}}]")
    jobs, output = dry_run(copy)
    assert planned_outputs(output, "sweep_stage") == ["results/stage_e/resnet32/dtr/job0.json"]
    assert "plan_refinement" not in jobs  # the trigger reads no point stage
    for rule in SERIES_RULES[1:]:
        # The map plan reads every policy's series: other policies' maps wait for it.
        for path, reason in planned_jobs(output, rule).items():
            assert "/dtr" in path or MAP_PLAN in _updated(reason), (path, reason)


def test_changing_stage_b_threshold_plans_no_stage_a_job(completed: Path, tmp_path: Path) -> None:
    copy = copy_of(completed, tmp_path)
    amend(copy, "threshold", "[{path: stage_b/overhead_change, old: 0.25, new: 0.5}]")
    jobs, output = dry_run(copy)
    assert jobs["plan_refinement"] == 1
    assert not [p for p in planned_outputs(output, "sweep_stage") if "stage_a" in p]
    for rule in SERIES_RULES[1:]:
        for reason in planned_jobs(output, rule).values():
            assert {PLAN, MAP_PLAN} & set(_updated(reason)), reason


def test_changing_the_stage_a_grid_plans_stage_a_and_everything_downstream(
    completed: Path, tmp_path: Path
) -> None:
    copy = copy_of(completed, tmp_path)
    old = "{start: 0.101, stop: 0.107, step: 0.003}"
    new = "{start: 0.101, stop: 0.107, step: 0.002}"
    amend(copy, "grid", f"[{{path: stage_a/ratios, old: {old}, new: {new}}}]")
    jobs, output = dry_run(copy)
    swept = planned_outputs(output, "sweep_stage")
    for policy in ("dtr", "nbhd-penalty"):
        assert any(f"stage_a/resnet32/{policy}/" in p for p in swept)
        assert any(f"stage_c/resnet32/{policy}/" in p for p in swept)  # C reads the grid
    downstream = ("plan_refinement", "find_edges", "repeat_regions", "gather_records")
    assert all(jobs.get(rule) for rule in (*downstream, "tabulate_holes", "plot_trace")), jobs


def test_records_name_their_protocol_version_and_amendments(completed: Path) -> None:
    rendered = next((completed / "results" / "protocol").glob("*.json"))
    version = json.loads(rendered.read_text())["version"]
    table = pq.read_table(completed / "results" / "records.parquet").to_pylist()
    assert {row["protocol_version"] for row in table} == {version}
    assert {tuple(row["amendments"]) for row in table} == {()}  # the scenario has only a base


def test_a_ranking_policy_has_the_trace_ranked_once_before_its_jobs(
    completed: Path, tmp_path: Path
) -> None:
    copy = copy_of(completed, tmp_path)
    new = "{alpha: 0.3, floor: 0.01, seed: 7}"
    amend(copy, "add-tcontrol", f"[{{path: policies/tcontrol-inspired, new: {new}}}]")
    jobs, output = dry_run(copy)
    (ranking,) = planned_jobs(output, "rank_storages")
    assert re.fullmatch(r"results/centrality/resnet32-[0-9a-f]{16}-7\.parquet", ranking)
    inputs = re.findall(r"^rule sweep_stage:\n    input: (.+)\n", output, re.M)
    assert jobs["sweep_stage"] == len(inputs) == 2 and all(ranking in i for i in inputs)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies.py"


def test_a_policy_from_a_file_joins_by_amendment_and_an_edit_reruns_only_its_jobs(
    completed: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    copy = copy_of(completed, tmp_path)
    source = copy / "mine" / "policies.py"  # the example, relative to the workflow's directory
    source.parent.mkdir()
    source.write_text(EXAMPLES.read_text())
    change = "{path: policies/stale-squared, new: {source: 'mine/policies.py:stale_squared'}}"
    amend(copy, "add-stale-squared", f"[{change}]")
    before = set((copy / "results" / "records").iterdir())
    snakemake(copy)  # the audit, its last rule, passes
    new = [
        json.loads(p.read_text()) for p in set((copy / "results" / "records").iterdir()) - before
    ]
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    assert {r["policy"]["name"] for r in new} == {"stale-squared"}
    assert {(r["policy"]["source"], r["policy"]["sha256"]) for r in new} == {
        ("mine/policies.py:stale_squared", sha)
    }
    sampled = {r["stage"] for r in new if r["stage"] in "ABC"}
    assert sampled == {"A"}  # a baseline: the Stage A grid (then its edges, maps, ...)

    source.write_text(source.read_text().replace("** 2", "** 3"))
    monkeypatch.chdir(copy)
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status != 0
    assert any(
        "policy file mine/policies.py:stale_squared has sha256" in f
        for f in failures(report, "provenance")
    )
    jobs, output = dry_run(copy)
    assert set(jobs) - {"total"} <= AGGREGATES | set(SERIES_RULES)
    assert jobs["sweep_stage"] == 2
    for rule in SERIES_RULES:
        for path, reason in planned_jobs(output, rule).items():
            pending = bool({PLAN, MAP_PLAN} & set(_updated(reason)))
            assert "/stale-squared" in path or pending, (path, reason)
    snakemake(copy)
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 0, json.dumps(report, indent=1)
