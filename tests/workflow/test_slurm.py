"""The tiny scenario on a real one-node SLURM cluster (started by tests/cluster/), submitted
through Snakemake's SLURM executor with the repository's profile: the same records' results and
the same tables as the local run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dtrholes.study import records
from tests.support.archive import archive_source
from tests.support.scenario import REPO, make_scenario

CLUSTER = REPO / "tests" / "cluster"
PROFILE = REPO / "profiles" / "slurm"


def missing_prerequisite() -> str | None:
    """Why this machine cannot run a SLURM cluster, or None."""
    if os.geteuid() != 0:
        return "starting a SLURM cluster needs root"
    if not shutil.which("sbatch") and not shutil.which("apt-get"):
        return "SLURM is not installed and there is no apt-get to install it"
    return None


MISSING = missing_prerequisite()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


def run_bounded(command: list[str], timeout: float, **kwargs) -> str:
    """Runs a command in its own session and returns its output; past the timeout the whole
    session is killed (Snakemake waiting on a job status may ignore SIGTERM)."""
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kwargs,
    ) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            pytest.fail(f"{command[0]} killed after {timeout} s:\n{output[-5000:]}")
    assert process.returncode == 0, output
    return output


def cluster_up() -> bool:
    if not shutil.which("scontrol"):
        return False
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False
    return ping.returncode == 0 and "UP" in ping.stdout


@pytest.fixture(scope="module")
def slurm() -> Iterator[None]:
    """A running cluster, stopped afterwards unless it was up before (started by hand)."""
    was_up = cluster_up()
    try:
        run_bounded([str(CLUSTER / "start-slurm.sh")], timeout=600)
        yield
    finally:
        if not was_up:
            run_bounded([str(CLUSTER / "stop-slurm.sh")], timeout=120)


def results_by_run(directory: Path) -> dict[str, dict]:
    return {
        r["run_id"]: r["result"] for r in records.read_records(directory / "results" / "records")
    }


def tables(directory: Path) -> dict[str, object]:
    found = sorted((directory / "results" / "tables").iterdir())
    return {
        path.name: pq.read_table(path).to_pylist()
        if path.suffix == ".parquet"
        else path.read_text()
        for path in found
    }


@pytest.mark.slow
def test_slurm_run_matches_the_local_run(slurm: None, completed: Path, tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "scenario")
    env = {**os.environ, "DTR_HOLES_ARCHIVE": archive_source(), "DTR_HOLES_SIMRD": ""}
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    command += ["--directory", str(scenario), "--workflow-profile", str(PROFILE)]
    # The first status check after 1 s rather than the profile's 40 (squeue still qualifies:
    # the test cluster keeps finished jobs for 300 s).
    command += ["--slurm-init-seconds-before-status-checks", "1"]
    # About 30 jobs in a dozen dependency levels, each level found by status checks that back
    # off by 10 s while nothing finishes: minutes, not seconds, on one 2-core node.
    output = run_bounded(command, timeout=1200, env=env)
    assert "submitted with SLURM jobid" in output and "(100%) done" in output
    local = results_by_run(completed)
    assert local and results_by_run(scenario) == local
    assert tables(scenario) == tables(completed)
