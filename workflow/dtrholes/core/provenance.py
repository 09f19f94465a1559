"""Facts about the code and machine that produced a result, gathered once per process."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import llvmlite.binding as llvm

import dtrholes

REPO_ROOT = Path(__file__).resolve().parents[3]
LOCK = REPO_ROOT / "requirements.lock"
LIBRARIES = ("numpy", "numba", "llvmlite", "pyarrow", "pandas", "snakemake")


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


@functools.cache
def code() -> dict:
    """Package version, git commit, whether tracked files differ from it, and the sha256 of the
    pinned environment, requirements.lock (None where it is absent, as in an installed copy)."""
    commit = _git("rev-parse", "HEAD")
    dirty = None if commit is None else _git("status", "--porcelain", "--untracked-files=no") != ""
    return {
        "package_version": dtrholes.__version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "lock_sha256": _sha256(LOCK),
    }


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu(cpuinfo: str | None = None) -> str:
    """The processor as the system names it, with its family and model where Linux reports
    them, the CPU count, and the processor the kernel is compiled for: machines of one kind
    differ in speed, so two runs' times compare only knowing what ran them."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f", family {fields['cpu family']} model {fields['model']}"
    return f"{name}, {os.cpu_count()} CPUs, compiled for {llvm.get_host_cpu_name()}"


@functools.cache
def environment() -> dict:
    """Python and library versions, the host name and its processor."""
    return {
        "python": sys.version.split()[0],
        "libraries": {name: _version(name) for name in LIBRARIES},
        "host": platform.node(),
        "cpu": cpu(),
    }
