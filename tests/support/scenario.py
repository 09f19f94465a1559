"""The tiny ResNet-32 scenario the workflow tests run, and helpers that drive Snakemake."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.archive import archive_source

REPO = Path(__file__).resolve().parents[2]

# ResNet-32 under DTR completes at 0.101 and 0.107 and fails from 0.102 to 0.106: Stage A's
# three budgets bracket the region, Stage B fills it in at 0.001; three of the study's
# development points run DTR again (the comparison with the study sets them beside its own).
BASE = """\
fixed: 2026-09-26
title: tiny scenario
parameters:
  traces:
    development: []
    confirmatory: [resnet32]
  policies:
    dtr: {}
    nbhd-penalty: {b: 0.25}
  frozen: [dtr, nbhd-penalty]
  points:
    DEV: [{trace: resnet32, policies: [dtr], ratios: [0.101, 0.104, 0.107], repeats: [0]}]
  limits: {overhead_cap: 60, wall_clock_s: 1200}
  stage_a:
    ratios: {start: 0.101, stop: 0.107, step: 0.003}
    repeats: {share: 0.3, count: 3, seed: 20260926}
  stage_b: {step: 0.001, triggers: [status, overhead, stage_c], overhead_change: 0.25}
  stage_c: {step: 0.0005, dense_below: 0.104, dense: 1, sparse: 1, seed: 20260927}
  confirmation: {repeats: 2, points: brackets, simrd: [dtr]}
  edges: {max_runs: 60}
  explain: {top: 3}
  maps: {margin: 0.0005, max_runs: 2000, whole_range_cap: 100}
"""

CONFIG = """\
protocol: protocol
trace_sheet: config/traces.tsv
archive: null
traces: null
policies: null
points_per_job: 3
maps: true
map_chunks: 2
map_whole: []
simrd_source: null
"""

# Stage A: 3 budgets, one of them three times: 5 points per policy, 3 per job -> 2 jobs;
# Stage C: one sample in each of the 2 intervals -> 1 job. Stage B waits for its plan, and so
# does the development points' one job of DTR (it is asked for with the series, which holds
# Stage B); the map chunks wait for the map plan.
PLANNED = {
    "all": 1,
    "audit_results": 1,
    "baseline_trace": 1,
    "compare_paper": 1,
    "compare_policies": 1,
    "crosscheck_simrd": 1,
    "explain_regions": 2,
    "fetch_traces": 1,
    "find_edges": 2,
    "merge_map": 2,
    "gather_records": 1,
    "plan_maps": 1,
    "plan_refinement": 1,
    "plot_maps": 1,
    "plot_figure1": 1,
    "plot_trace": 1,
    "plot_zoom": 2,
    "render_protocol": 1,
    "repeat_regions": 2,
    "sweep_stage": 6,
    "tabulate_holes": 1,
    "tabulate_maps": 1,
    "total": 32,
}


def make_scenario(directory: Path) -> Path:
    (directory / "config").mkdir(parents=True)
    (directory / "protocol" / "amendments").mkdir(parents=True)
    (directory / "config" / "config.yaml").write_text(CONFIG)
    (directory / "protocol" / "base.yaml").write_text(BASE)
    shutil.copy(REPO / "config" / "traces.tsv", directory / "config" / "traces.tsv")
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


def planned_jobs(output: str, rule: str) -> dict[str, str]:
    """Output files -> reason of the planned (or run) jobs of one rule, from Snakemake's log."""
    blocks = re.findall(rf"^rule {rule}:\n((?:    .*\n)+)", output, re.M)
    return {
        re.search(r"output: (.+)", b).group(1): re.search(r"reason: (.+)", b).group(1)
        for b in blocks
    }


def planned_outputs(output: str, rule: str) -> list[str]:
    """The output files of the planned (or run) jobs of one rule."""
    return sorted(planned_jobs(output, rule))
