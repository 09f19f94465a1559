"""The Snakemake pipeline on a tiny ResNet-32 scenario: planned jobs, a full run with a hole
region, exact edges and repeats, a killed run that resumes, and reruns after amendments."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dtrholes.holes import maps
from dtrholes.study import records
from tests.support.archive import archive_source
from tests.support.records import session_processes
from tests.support.scenario import PLANNED, REPO, copy_of, planned, snakemake


def test_dry_run_plans_one_job_per_chunk(scenario: Path) -> None:
    assert planned(snakemake(scenario, "-n")) == PLANNED


def test_listed_costly_traces_start_first(scenario: Path) -> None:
    def priorities(output: str) -> dict[str, set[str]]:
        blocks = re.findall(r"^(?:rule|checkpoint) (\w+):\n((?:    .*\n)+)", output, re.M)
        found: dict[str, set[str]] = {}
        for rule, block in blocks:
            found.setdefault(rule, set()).update(re.findall(r"priority: (\d+)", block))
        return found

    listed = priorities(snakemake(scenario, "-n", "--config", "costliest_first=[lstm,resnet32]"))
    for rule in ("baseline_trace", "sweep_stage", "plan_refinement"):
        assert listed[rule] == {"1"}, rule  # the second of two listed
    assert listed["render_protocol"] == listed["fetch_traces"] == set()
    assert not any(priorities(snakemake(scenario, "-n")).values())


def test_full_run_finds_confirms_and_edges_the_region(completed: Path) -> None:
    found = records.read_records(completed / "results" / "records")
    stages = {r["stage"] for r in found}
    assert stages == {"A", "B", "C", "DEV", "edge", "repeat", "map"}
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
    assert "| resnet32 | confirmatory | nbhd-penalty |" in comparison
    crosscheck = (completed / "results" / "tables" / "crosscheck.md").read_text()
    assert "not run" in crosscheck and "confirmed by simrd" not in crosscheck
    figures = completed / "results" / "figures"
    for kind in ("cliffs-resnet32", "overhead-resnet32", "zoom-resnet32-dtr", "figure1-dtr"):
        for suffix in (".png", ".pdf"):
            assert (figures / f"{kind}{suffix}").stat().st_size
    zoomed = (figures / "zoom-resnet32-dtr.md").read_text()
    assert "| 1 | 1,016,179,144 (0.10100) |" in zoomed and "| yes |" in zoomed


def test_a_completed_run_plans_nothing(completed: Path, tmp_path: Path) -> None:
    assert "Nothing to be done" in snakemake(copy_of(completed, tmp_path), "-n")


def test_every_confirmed_region_is_explained_from_its_records(completed: Path) -> None:
    directory = completed / "results" / "explain" / "resnet32" / "dtr"
    pairs = json.loads((directory / "explain.json").read_text())
    assert len(pairs) == 2  # the region's lower and upper edge brackets
    run_ids = {r["run_id"] for r in records.read_records(completed / "results" / "records")}
    for i, pair in enumerate(pairs):
        assert pair["ok"]["outcome"] == "ok" and pair["fail"]["outcome"] == "oom"
        assert set(pair["cites"].values()) <= run_ids
        assert pair["retention"]["valid"]
        assert (directory / f"pair-{i}.png").stat().st_size > 0
        assert not (directory / f"pair-{i}.pdf").exists()  # PNG only in the pipeline
        m = pair["mechanism"]
        first = m["text"].split(". ")[0]
        difference = abs(pair["fail"]["budget"] - pair["ok"]["budget"])
        assert f"{difference:,} bytes" in first and f"evicts {m['storage']} (" in first
        assert f"at step {m['removed_at_step']} " in first
        assert f"{m['steps_until_failure']} steps later" in first
    text = (directory / "explain.md").read_text()
    assert "### 4. Retention" in text and text.count("**Mechanism.**") == 2
    log = (completed / "results" / "logs" / "explain" / "resnet32" / "dtr.log").read_text()
    assert [line.split()[0] for line in log.splitlines()[:2]] == ["[1/2]", "[2/2]"]


def test_full_run_maps_the_region_exactly(completed: Path) -> None:
    results = completed / "results"
    dtr = maps.read(results / "maps" / "resnet32" / "dtr.parquet")
    assert maps.outcome_at(dtr, 1_024_657_199) == "ok"
    assert maps.outcome_at(dtr, 1_024_657_200) == "oom"
    found = records.read_records(results / "records")
    assert {t.run_id for t in dtr.tiles} <= {r["run_id"] for r in found}
    resumed = [r["resumed_at"] > 0 for r in found if r["stage"] == "map"]
    assert sum(resumed) > len(resumed) / 2, "map runs continue from the run below's saved state"
    assert not any(r.get("resumed_at") for r in found if r["stage"] != "map")
    table = pq.read_table(results / "tables" / "maps.parquet").to_pylist()
    row = next(r for r in table if r["policy"] == "dtr")
    assert (row["holes"], row["exact_holes"], row["uncovered_bytes"]) == (5, 5, 0)
    assert row["sample_disagreements"] == 0 and row["missed_by_stage_b"] == 4
    assert "resnet32: dtr not monotone: 5 holes" in (results / "tables" / "maps.md").read_text()
    for suffix in (".png", ".pdf"):
        assert (results / "figures" / f"maps-resnet32{suffix}").stat().st_size


def table_rows(text: str) -> list[list[list[str]]]:
    """Each Markdown table in a text as its rows of cells, the delimiter row left out; a pipe
    escaped as \\| is part of a cell, not a separator."""
    tables: list[list[list[str]]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(re.split(r"(?<!\\)\|", line.strip()[1:-1]))
        previous = line
    for table in tables:
        assert all(re.fullmatch(r" *:?-+:? *", c) for c in table.pop(1)), table
    return tables


def test_every_markdown_table_written_has_its_headers_cell_count(completed: Path) -> None:
    results = completed / "results"
    tabled = []
    for path in sorted(results.rglob("*.md")):
        for table in table_rows(path.read_text(encoding="utf-8")):
            tabled.append(str(path.relative_to(results)))
            header = table[0]
            for row in table[1:]:
                assert len(row) == len(header), (path, header, row)
    wanted = {f"tables/{t}.md" for t in ("holes", "comparison", "crosscheck", "paper", "maps")}
    assert wanted | {"audit/audit.md", "explain/resnet32/dtr/explain.md"} <= set(tabled)


def test_report_bundles_tables_and_figures(completed: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.zip"
    snakemake(copy_of(completed, tmp_path), "--report", str(report))
    with zipfile.ZipFile(report) as bundle:
        names = "\n".join(bundle.namelist())
    assert "holes.md" in names and "cliffs-resnet32.png" in names


# Lints the README's development section justifies: the project installs into one virtual
# environment (pyproject.toml), so rules name no conda environment or container; and the
# interpreter's path stays out of the jobs' parameters.
JUSTIFIED_LINTS = {
    "Specify a conda environment or container for each rule.",
    "Shell command directly uses variable DTR_HOLES from outside of the rule",
}


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
    readme = (REPO / "README.md").read_text()
    assert "conda environment" in readme and "variable DTR_HOLES" in readme


@pytest.mark.slow
def test_killed_run_resumes_without_lost_duplicated_or_corrupt_records(
    scenario: Path, request: pytest.FixtureRequest
) -> None:
    """Snakemake alone is killed (kill -9 of its pid): its running job and the job's worker
    stop by themselves, and the README's recovery (`--unlock`, then the same command) works."""
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
    while time.monotonic() < deadline and not (
        written.is_dir() and any(written.glob("*.json")) and session_processes(run.pid) != [run.pid]
    ):
        time.sleep(0.05)
    os.kill(run.pid, signal.SIGKILL)  # mid-sweep; the job (same session) is left alone
    run.wait()
    deadline = time.monotonic() + 10
    while session_processes(run.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not session_processes(run.pid), "a job outlived its Snakemake"
    # Asked for only now: the run above need not wait while another worker completes it.
    completed = request.getfixturevalue("completed")
    expected = {p.name for p in (completed / "results" / "records").glob("*.json")}
    assert 0 < len(list(written.glob("*.json"))) < len(expected)
    snakemake(scenario, "--unlock")
    snakemake(scenario)
    found = records.read_records(written)  # every file parses and validates
    assert {f"{r['run_id']}.json" for r in found} == expected
    # A write the kill interrupted may leave its temporary file: never a record (the audit's
    # evidence table lists it as an interrupted write), and the rerun wrote the record itself.
    for partial in written.glob(".*"):
        assert partial.suffix == ".part"
        assert partial.name.split(".")[1] + ".json" in expected
