"""Facts about the code and machine that produced a result, gathered once per process."""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import dtrholes

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("numpy", "numba", "llvmlite", "pyarrow", "pandas", "snakemake")


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.cache
def code() -> dict:
    """Package version, git commit and whether tracked files differ from it."""
    commit = _git("rev-parse", "HEAD")
    dirty = None if commit is None else _git("status", "--porcelain", "--untracked-files=no") != ""
    return {"package_version": dtrholes.__version__, "git_commit": commit, "git_dirty": dirty}


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


@functools.cache
def environment() -> dict:
    """Python and library versions and the host name."""
    return {
        "python": sys.version.split()[0],
        "libraries": {name: _version(name) for name in LIBRARIES},
        "host": platform.node(),
    }
