"""The Snakemake pipeline on a tiny scenario: planned jobs, a full run, and an idle rerun."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dtrholes import records
from tests.conftest import archive_source

REPO = Path(__file__).resolve().parents[2]

PROTOCOL = """\
fixed: "2026-09-26"
traces:
  development: [resnet32]
  confirmatory: []
policies:
  dtr: {}
  nbhd-penalty: {b: 0.25}
limits:
  overhead_cap: 60
  wall_clock_s: 1200
stage_a:
  ratios: {start: 0.10, stop: 0.12, step: 0.01}
  repeats: {share: 0.3, count: 3, seed: 20260926}
stage_c:
  step: 0.001
  dense_below: 0.115
  dense: 2
  sparse: 1
  seed: 20260927
"""

CONFIG = """\
protocol: protocol/base.yaml
trace_sheet: config/traces.tsv
archive: null
traces: null
policies: null
points_per_job: 3
"""


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    (tmp_path / "config").mkdir()
    (tmp_path / "protocol").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(CONFIG)
    (tmp_path / "protocol" / "base.yaml").write_text(PROTOCOL)
    shutil.copy(REPO / "config" / "traces.tsv", tmp_path / "config" / "traces.tsv")
    return tmp_path


def snakemake(directory: Path, *args: str) -> str:
    env = {**os.environ, "DTR_HOLES_ARCHIVE": archive_source()}
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
    """Job counts from a dry run's 'Job stats' table."""
    table = output.split("Job stats:")[1].split("Reasons:")[0]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_dry_run_plans_one_job_per_chunk(scenario: Path) -> None:
    # Stage A: 3 ratios, one of them three times: 5 points per policy, 3 per job -> 2 jobs.
    # Stage C: 2 samples inside each of the 2 intervals: 4 points per policy -> 2 jobs.
    jobs = planned(snakemake(scenario, "-n"))
    assert jobs == {
        "all": 1,
        "baseline_trace": 1,
        "fetch_traces": 1,
        "gather_records": 1,
        "sweep_stage": 8,
        "tabulate_holes": 1,
        "total": 13,
    }


def test_full_run_writes_valid_records_and_reruns_nothing(scenario: Path) -> None:
    snakemake(scenario)
    found = records.read_records(scenario / "results" / "records")
    assert len(found) == 18
    assert sorted(r["stage"] for r in found) == ["A"] * 10 + ["C"] * 8
    assert {r["status"] for r in found} == {"complete"}
    assert {r["policy"]["name"] for r in found} == {"dtr", "nbhd-penalty"}
    table = pq.read_table(scenario / "results" / "records.parquet").to_pylist()
    outcomes = {(row["policy"], row["ratio"], row["outcome"]) for row in table}
    assert ("dtr", 0.1, "ok") in outcomes and ("nbhd-penalty", 0.11, "ok") in outcomes
    holes = (scenario / "results" / "holes" / "holes.md").read_text()
    assert "| resnet32 | dtr | 7 |" in holes and "| resnet32 | nbhd-penalty | 7 |" in holes
    assert "Nothing to be done" in snakemake(scenario, "-n")


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


def test_killed_run_resumes_without_lost_duplicated_or_corrupt_records(scenario: Path) -> None:
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
    assert 0 < len(list(written.glob("*.json"))) < 18
    snakemake(scenario, "--unlock")
    snakemake(scenario, "--rerun-incomplete")
    found = records.read_records(written)  # every file parses and validates
    assert len(found) == 18 and len({r["run_id"] for r in found}) == 18
    table = pq.read_table(scenario / "results" / "records.parquet")
    assert table.num_rows == 18
