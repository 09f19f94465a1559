"""Workflow fixtures: a fresh tiny scenario, and one run to completion shared by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workflow.scenario import make_scenario, snakemake


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_scenario(tmp_path / "scenario")


@pytest.fixture(scope="session")
def completed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario run to the end once; tests copy it before changing anything."""
    directory = make_scenario(tmp_path_factory.mktemp("completed") / "scenario")
    snakemake(directory)
    return directory
