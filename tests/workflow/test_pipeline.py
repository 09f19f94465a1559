"""The Snakemake pipeline on a tiny ResNet-32 scenario: planned jobs, a full run with a hole
region, exact edges and repeats, a killed run that resumes, and reruns after amendments."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dtrholes import records
from tests.conftest import archive_source

REPO = Path(__file__).resolve().parents[2]

# ResNet-32 under DTR completes at 0.101 and 0.107 and fails from 0.102 to 0.106: Stage A's
# three budgets bracket the region, Stage B fills it in at 0.001.
BASE = """\
fixed: 2026-09-26
title: tiny scenario
parameters:
  traces:
    development: [resnet32]
    confirmatory: []
  policies:
    dtr: {}
    nbhd-penalty: {b: 0.25}
  limits: {overhead_cap: 60, wall_clock_s: 1200}
  stage_a:
    ratios: {start: 0.101, stop: 0.107, step: 0.003}
    repeats: {share: 0.3, count: 3, seed: 20260926}
  stage_b: {step: 0.001, triggers: [status, overhead, stage_c], overhead_change: 0.25}
  stage_c: {step: 0.0005, dense_below: 0.104, dense: 1, sparse: 1, seed: 20260927}
  confirmation: {repeats: 2, points: brackets, simrd: [dtr]}
  edges: {max_runs: 60}
"""

CONFIG = """\
protocol: protocol
trace_sheet: config/traces.tsv
archive: null
traces: null
policies: null
points_per_job: 3
simrd_source: null
"""

# Stage A: 3 budgets, one of them three times: 5 points per policy, 3 per job -> 2 jobs;
# Stage C: one sample in each of the 2 intervals -> 1 job. Stage B waits for its plan.
PLANNED = {
    "all": 1,
    "baseline_trace": 1,
    "collect_series": 2,
    "compare_policies": 1,
    "crosscheck_simrd": 1,
    "fetch_traces": 1,
    "find_edges": 2,
    "gather_records": 1,
    "plan_refinement": 1,
    "plot_trace": 1,
    "render_protocol": 1,
    "repeat_regions": 2,
    "sweep_stage": 6,
    "tabulate_holes": 1,
    "total": 22,
}


def make_scenario(directory: Path) -> Path:
    (directory / "config").mkdir(parents=True)
    (directory / "protocol" / "amendments").mkdir(parents=True)
    (directory / "config" / "config.yaml").write_text(CONFIG)
    (directory / "protocol" / "base.yaml").write_text(BASE)
    shutil.copy(REPO / "config" / "traces.tsv", directory / "config" / "traces.tsv")
    return directory


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_scenario(tmp_path / "scenario")


@pytest.fixture(scope="module")
def completed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario run to the end once; tests copy it before changing anything."""
    directory = make_scenario(tmp_path_factory.mktemp("completed") / "scenario")
    snakemake(directory)
    return directory


def copy_of(completed: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(completed, tmp_path / "copy", symlinks=True))


def snakemake(directory: Path, *args: str) -> str:
    env = {**os.environ, "DTR_HOLES_ARCHIVE": archive_source(), "DTR_HOLES_SIMRD": ""}
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    done = subprocess.run(
        [*command, "--directory", str(directory), "--cores", "2", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def planned(output: str) -> dict[str, int]:
    """Job counts from a dry run's 'Job stats' table (empty when nothing is to be done)."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:")[1].split("Reasons:")[0]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", table, re.M)}


def planned_outputs(output: str, rule: str) -> list[str]:
    """The output files of the planned jobs of one rule, from a dry run's job list."""
    blocks = re.findall(rf"^rule {rule}:\n((?:    .*\n)+)", output, re.M)
    return sorted(re.search(r"output: (.+)", b).group(1) for b in blocks)


def test_dry_run_plans_one_job_per_chunk(scenario: Path) -> None:
    assert planned(snakemake(scenario, "-n")) == PLANNED


def test_full_run_finds_confirms_and_edges_the_region(completed: Path) -> None:
    found = records.read_records(completed / "results" / "records")
    stages = {r["stage"] for r in found}
    assert stages == {"A", "B", "C", "edge", "repeat"}
    assert {r["status"] for r in found} == {"complete"}
    assert len({r["run_id"] for r in found}) == len(found)
    assert all(r["protocol"]["version"] for r in found)
    holes = pq.read_table(completed / "results" / "tables" / "holes.parquet").to_pylist()
    dtr = next(row for row in holes if row["policy"] == "dtr")
    (region,) = json.loads(dtr["region_brackets"])
    peak = json.loads((completed / "results" / "baselines" / "resnet32.json").read_text())
    ratio = {round(b / peak["peak_memory"], 3) for b in region.values() if b > 100}
    assert {0.101, 0.102, 0.106, 0.107} <= ratio and region["failing"] == 5
    assert dtr["regions_confirmed"] == 1 and dtr["repeat_disagreements"] == 0
    edges = json.loads(dtr["exact_edges"])
    assert len(edges) == 2 and all(e["resolved"] for e in edges)
    assert [(e["outcome_below"], e["outcome_above"]) for e in edges] == [
        ("ok", "oom"),
        ("oom", "ok"),
    ]
    table = (completed / "results" / "tables" / "holes.md").read_text()
    assert "| resnet32 | dtr |" in table and "1 (1)" in table
    comparison = (completed / "results" / "tables" / "comparison.md").read_text()
    assert "| resnet32 | development | nbhd-penalty |" in comparison
    crosscheck = (completed / "results" / "tables" / "crosscheck.md").read_text()
    assert "not run" in crosscheck and "confirmed by simrd" not in crosscheck
    for kind in ("cliffs", "zoom", "overhead"):
        for suffix in (".png", ".pdf"):
            assert (completed / "results" / "figures" / f"{kind}-resnet32{suffix}").stat().st_size
    assert "Nothing to be done" in snakemake(completed, "-n")


def test_report_bundles_tables_and_figures(completed: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.zip"
    snakemake(completed, "--report", str(report))
    with zipfile.ZipFile(report) as bundle:
        names = "\n".join(bundle.namelist())
    assert "holes.md" in names and "cliffs-resnet32.png" in names


# Lints the README's development section justifies: the project installs into one virtual
# environment (pyproject.toml), so rules name no conda environment or container.
JUSTIFIED_LINTS = {"Specify a conda environment or container for each rule."}


def test_lint_has_only_justified_warnings() -> None:
    env = {**os.environ, "DTR_HOLES_ARCHIVE": archive_source()}
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint", "--snakefile", str(REPO / "Snakefile")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    lints = set(re.findall(r"^\s+\* (.+?):?$", done.stdout + done.stderr, re.M))
    assert lints <= JUSTIFIED_LINTS, done.stdout + done.stderr
    assert "conda environment" in (REPO / "README.md").read_text()


def test_killed_run_resumes_without_lost_duplicated_or_corrupt_records(
    scenario: Path, completed: Path
) -> None:
    env = {**os.environ, "DTR_HOLES_ARCHIVE": archive_source()}
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    command += ["--directory", str(scenario), "--cores", "1"]
    run = subprocess.Popen(
        command,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    written = scenario / "results" / "records"
    deadline = time.monotonic() + 300
    while not (written.is_dir() and any(written.glob("*.json"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGKILL)  # mid-sweep: the job and its worker die at once
    run.wait()
    expected = {p.name for p in (completed / "results" / "records").glob("*.json")}
    assert 0 < len(list(written.glob("*.json"))) < len(expected)
    snakemake(scenario, "--unlock")
    snakemake(scenario, "--rerun-incomplete")
    found = records.read_records(written)  # every file parses and validates
    assert {f"{r['run_id']}.json" for r in found} == expected
    assert not list(written.glob(".*"))  # no partial file left behind
