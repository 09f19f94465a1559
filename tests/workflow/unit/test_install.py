"""What a user following the README gets: the report's dependency, the run defaults that make a
killed run recoverable, and a results directory that is theirs to delete."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
PROFILES = REPO_ROOT / "profiles"


def test_the_main_install_can_build_the_report() -> None:
    """`snakemake --report` needs pygments: the project's own dependencies pull it in, not
    only the test extra (pytest depends on pygments too, which hid the gap)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(r.startswith("snakemake[reports]") for r in project["dependencies"])


def profile(name: str) -> dict:
    return yaml.safe_load((PROFILES / name / "config.yaml").read_text(encoding="utf-8"))


def test_every_run_reruns_the_incomplete_jobs_a_kill_left() -> None:
    assert profile("default")["rerun-incomplete"] is True


def test_the_slurm_profile_carries_every_default() -> None:
    """A --workflow-profile replaces profiles/default instead of adding to it."""
    slurm = profile("slurm")
    assert {k: slurm.get(k) for k in profile("default")} == profile("default")


def test_nothing_under_results_is_tracked() -> None:
    """`rm -rf results` must leave the work tree clean, else every later record is dirty."""
    ignore = (REPO_ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "results/" in ignore
    assert not [line for line in ignore if line.startswith("!results")]
