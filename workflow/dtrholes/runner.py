"""Runs simulation requests in a worker process under a wall-clock guard, one record each."""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dtrholes import records
from dtrholes.records import Request, Usage
from simulator import Result, Trace, simulate


@dataclass(frozen=True)
class Outcome:
    """What the worker sends back for one request."""

    result: Result
    usage: Usage


def _execute(request: Request, trace: Trace) -> Outcome:
    started, wall, cpu = records.utc_now(), time.perf_counter(), time.process_time()
    result = simulate(
        trace, request.budget, request.policy, dict(request.params), request.overhead_cap
    )
    usage = Usage(
        started_utc=started,
        ended_utc=records.utc_now(),
        wall_s=time.perf_counter() - wall,
        cpu_s=time.process_time() - cpu,
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    )
    return Outcome(result, usage)


def _worker(connection, load: Callable[[str], Trace]) -> None:
    traces: dict[str, Trace] = {}
    while (request := connection.recv()) is not None:
        if request.trace not in traces:
            traces[request.trace] = load(request.trace)
        connection.send(_execute(request, traces[request.trace]))


class _Worker:
    """A worker process; killed and replaced when a request outlives the guard."""

    def __init__(self, load: Callable[[str], Trace]):
        self.load = load
        self.process = None

    def ask(self, request: Request, guard_s: float) -> Outcome | None:
        if self.process is None:
            context = mp.get_context("spawn")
            self.connection, child = context.Pipe()
            self.process = context.Process(target=_worker, args=(child, self.load), daemon=True)
            self.process.start()
        self.connection.send(request)
        if self.connection.poll(guard_s):
            return self.connection.recv()
        self.close(kill=True)
        return None

    def close(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.connection.send(None)
        self.process.join()
        self.process = None


def _timeout_usage(started: str, wall_s: float) -> Usage:
    return Usage(started, records.utc_now(), wall_s, 0.0, 0)


def run_requests(
    requests: Iterable[Request],
    load: Callable[[str], Trace],
    directory: Path,
    guard_s: float,
    progress: Callable[[str], None] = print,
) -> list[Path]:
    """Run every request lacking a record in `directory`; returns the records' paths.

    Rerunning after an interruption only runs what has no record yet. A request that outlives
    `guard_s` seconds is recorded as a timeout (unresolved) and its worker replaced. `load`
    must be picklable (a module-level function): it runs in the worker process.
    """
    requests = list(requests)
    paths, worker = [], _Worker(load)
    try:
        for i, request in enumerate(requests, 1):
            path = records.record_path(directory, request.run_id)
            if not path.exists():
                started, wall = records.utc_now(), time.perf_counter()
                outcome = worker.ask(request, guard_s)
                if outcome is None:
                    usage, result = _timeout_usage(started, time.perf_counter() - wall), None
                else:
                    usage, result = outcome.usage, outcome.result
                records.write_record(records.make_record(request, usage, result), directory)
                status = result.outcome if result else "timeout"
                progress(
                    f"[{i}/{len(requests)}] {request.trace} {request.policy} "
                    f"{request.budget:,} bytes: {status}"
                )
            paths.append(path)
    finally:
        worker.close()
    return paths
