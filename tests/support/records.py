"""Records for the workflow's tests: a tiny trace, its requests and records, and the runner's
worker loaders."""

from __future__ import annotations

import time
from pathlib import Path

from dtrholes.study import records
from dtrholes.study.records import Request, Usage
from simulator import get_policy, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

TRACE = tiny_trace(random_trace_text(3))
USAGE = Usage("2026-11-29T00:00:00+00:00", "2026-11-29T00:00:01+00:00", 1.0, 0.9, 1024)


def load_tiny(name: str):
    """Module-level, so the runner's worker process can unpickle it."""
    return TRACE


def load_slowly(name: str):
    """A worker that is busy (here: loading) when it is interrupted."""
    print("loading", flush=True)
    time.sleep(120)
    return TRACE


def request(budget: int, policy: str = "dtr", stage: str = "A", guard_s: float = 120) -> Request:
    params = get_policy(policy).resolve(None)
    return Request(
        TRACE.name, TRACE.sha256, policy, params, budget, wall_clock_s=guard_s, stage=stage
    )


def record_for(budget: int) -> dict:
    req = request(budget)
    return records.make_record(req, USAGE, simulate(TRACE, budget, "dtr"))


def session_processes(session: int) -> list[int]:
    """The live (not zombie) processes of a session."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if fields[0] != "Z" and int(fields[3]) == session:
            found.append(int(stat.parent.name))
    return found
