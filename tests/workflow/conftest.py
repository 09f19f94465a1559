"""Workflow fixtures: a fresh tiny scenario, and one run to completion shared by the tests."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import pytest

from tests.support.scenario import make_scenario, snakemake


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_scenario(tmp_path / "scenario")


@pytest.fixture(scope="session")
def completed(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The scenario run to the end once per test session: the first worker (pytest-xdist) to
    ask runs it, holding a lock that the others wait on, and they all read the one result.
    Tests copy it before changing anything or running Snakemake in it."""
    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # the session's directory, above each worker's own
    directory, done = root / "completed" / "scenario", root / "completed.done"
    with open(root / "completed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(directory.parent, ignore_errors=True)  # a failed attempt's
            snakemake(make_scenario(directory))
            done.touch()
    return directory
