"""Runs simulation requests in a worker process under a wall-clock guard, one record each."""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import resource
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from dtrholes.core import paths, processes
from dtrholes.study import records
from dtrholes.study.records import Request, Usage
from dtrholes.traces import betweenness
from simulator import Options, Replayer, Result, Trace, prepare, simulate
from simulator.result import TIMEOUT


@dataclass(frozen=True)
class Outcome:
    """What the worker sends back for one request."""

    result: Result
    usage: Usage


def execute(request: Request, trace: Trace, results_dir: Path | None) -> Result:
    """The simulation a request asks for (policies' centrality cached under `results_dir`)."""
    return _simulate(request, trace, _inputs(request, trace, results_dir))


def _inputs(request: Request, trace: Trace, results_dir: Path | None):
    """The policy's parameters, and the storages' centrality for policies that read it."""
    params = dict(request.params)
    return params, betweenness.for_policy(trace, request.policy_ref, params, results_dir)


def _simulate(request: Request, trace: Trace, inputs) -> Result:
    params, central = inputs
    ref, cap = request.policy_ref, request.overhead_cap
    return simulate(trace, request.budget, Options(ref, params, cap, central))


class _Resumer:
    """The map runs' replayer: a map tiles upward, each run continuing from the state the
    one below it saved (exact, see `Replayer`); other stages' runs replay from the start."""

    def __init__(self) -> None:
        self.key, self.replayer = None, None

    def execute(self, request: Request, trace: Trace, inputs) -> tuple[Result, int]:
        if request.stage != paths.MAP:
            return _simulate(request, trace, inputs), 0
        key = (request.trace_sha256, request.policy_ref, request.params, request.overhead_cap)
        if key != self.key:
            params, central = inputs
            self.key = key
            ref, cap = request.policy_ref, request.overhead_cap
            self.replayer = Replayer(trace, Options(ref, params, cap, central))
        return self.replayer.simulate(request.budget), self.replayer.resumed_at


def _timed(run: Callable[[], tuple[Result, int]]) -> Outcome:
    """`run`'s Result and what it cost; `run` also says where a map run's replay resumed."""
    started, wall, cpu = records.utc_now(), time.perf_counter(), time.process_time()
    result, resumed_at = run()
    usage = Usage(
        started_utc=started,
        ended_utc=records.utc_now(),
        wall_s=time.perf_counter() - wall,
        cpu_s=time.process_time() - cpu,
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        resumed_at=resumed_at,
        pid=os.getpid(),
    )
    return Outcome(result, usage)


def _start_child() -> None:
    """A worker interrupted (Ctrl-C reaches the whole process group) exits without a
    traceback: its caller is interrupted too and reports it once. A worker whose caller died
    (killed) stops too."""
    signal.signal(signal.SIGINT, lambda signum, _: os._exit(128 + signum))
    processes.exit_with_parent(mp.parent_process().pid)


def _worker(connection, load: Callable[[str], Trace], results_dir: Path) -> None:
    """Runs every request it is sent; the caller kills it when one outlives the guard."""
    _start_child()
    traces: dict[str, Trace] = {}
    inputs: dict[tuple, tuple] = {}
    resumer = _Resumer()
    while (asked := connection.recv()) is not None:
        request, _ = asked
        if request.trace not in traces:
            traces[request.trace] = load(request.trace)
        trace = traces[request.trace]
        key = (request.trace, request.policy_ref, request.params)
        if key not in inputs:  # loaded before the clock starts: a first ranking is no run's time
            inputs[key] = _inputs(request, trace, results_dir)
        run = functools.partial(resumer.execute, request, trace, inputs[key])
        connection.send(_timed(run))


def _template(connection, load: Callable[[str], Trace], results_dir: Path) -> None:
    """Runs no simulation: loads each request's trace, policy inputs and compiled kernel, then
    answers the request from a child forked for it alone, which only simulates and is killed
    when it outlives the guard (the guard times the run; loading is not part of it). Each run
    thus starts in a new process that ran nothing before, without paying again for the
    interpreter, the imports, the trace and the kernel."""
    _start_child()  # and so do the children it forks
    traces: dict[str, Trace] = {}
    fork = mp.get_context("fork")
    while (asked := connection.recv()) is not None:
        request, guard_s = asked
        if request.trace not in traces:
            traces[request.trace] = load(request.trace)
        trace = traces[request.trace]
        inputs = _inputs(request, trace, results_dir)
        prepare(trace, Options(request.policy_ref, inputs[0], request.overhead_cap, inputs[1]))
        mine, theirs = fork.Pipe()
        child = fork.Process(target=_answer, args=(theirs, request, trace, inputs))
        child.start()
        theirs.close()  # so that a child dying unanswered is an EOF, not a timeout
        ready = wait([mine, connection], guard_s)
        if connection in ready:  # nothing is sent during a run: the session is gone
            child.kill()
            return
        try:
            outcome = mine.recv() if ready else None
        except (EOFError, ConnectionError):  # the process died
            child.join()
            raise RuntimeError(f"run {request.run_id} died, exit code {child.exitcode}") from None
        mine.close()
        child.kill()
        child.join()
        connection.send(outcome)


def _answer(connection, request: Request, trace: Trace, inputs) -> None:
    processes.exit_with_parent(mp.parent_process().pid)
    connection.send(_timed(lambda: (_simulate(request, trace, inputs), 0)))


class _Worker:
    """A worker process answering requests: `_worker` (reused; killed and replaced when a
    request outlives the guard) or `_template` (a new process per request, guarded inside).

    A reused worker is forked: it starts with the caller's imports, which a spawned one paid
    for again in every job (about 1.4 s of CPU). A template is spawned, so that each fresh
    session has an interpreter (and hash seed) of its own.
    """

    def __init__(self, load: Callable[[str], Trace], results_dir: Path | None, fresh: bool):
        self.target, self.args = (_template if fresh else _worker), (load, results_dir)
        self.process = None

    def ask(self, request: Request, guard_s: float | None) -> Outcome | None:
        """The answer, or None when the run took longer than `guard_s` (None: no guard)."""
        if self.process is None:
            context = mp.get_context("spawn" if self.target is _template else "fork")
            self.connection, child = context.Pipe()
            self.process = context.Process(target=self.target, args=(child, *self.args))
            self.process.daemon = self.target is _worker  # a template has children of its own
            self.process.start()
            child.close()  # so that a worker dying unanswered is an EOF, not a wait
        self.connection.send((request, guard_s))
        try:
            if self.connection.poll(None if self.target is _template else guard_s):
                return self.connection.recv()
        except (EOFError, ConnectionError):  # the process died
            self.process.join()
            code, self.process = self.process.exitcode, None
            raise RuntimeError(
                f"the worker process died (exit code {code}) on run {request.run_id}"
            ) from None
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


class Session:
    """Runs requests one at a time and records each; a request with a record is not rerun.

    `load` must be picklable (a module-level function): it runs in the worker process, which
    caches policies' centrality under `results_dir`. With `fresh`, every request runs in a new
    process that has run nothing before (forked from one that loaded the trace and kernel).
    """

    def __init__(
        self,
        load: Callable[[str], Trace],
        directory: Path,
        results_dir: Path | None = None,
        fresh: bool = False,
    ):
        self.directory = Path(directory)
        self.worker = _Worker(load, results_dir, fresh)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: type | None, *_: object) -> None:
        self.worker.close(kill=exc_type is not None)  # interrupted: no waiting for the run

    def run(self, request: Request) -> tuple[Result | None, bool]:
        """The request's Result (None: it timed out) and whether it was executed just now."""
        path = records.record_path(self.directory, request.run_id)
        if path.exists():
            result = records.read_record(path)["result"]
            return (None if result is None else Result.from_dict(result)), False
        started, wall = records.utc_now(), time.perf_counter()
        outcome = self.worker.ask(request, request.wall_clock_s)
        if outcome is None:
            usage, result = _timeout_usage(started, time.perf_counter() - wall), None
        else:
            usage, result = outcome.usage, outcome.result
        records.write_record(records.make_record(request, usage, result), self.directory)
        return result, True


def run_requests(
    requests: Iterable[Request],
    load: Callable[[str], Trace],
    directory: Path,
    results_dir: Path | None = None,
    fresh: bool = False,
    progress: Callable[[str], None] = print,
) -> list[Path]:
    """Run every request lacking a record in `directory`; returns the records' paths.

    Rerunning after an interruption only runs what has no record yet. A request that outlives
    its wall-clock guard is recorded as a timeout (unresolved): its process is killed (and a
    reused worker replaced).
    """
    requests = list(requests)
    with Session(load, directory, results_dir, fresh) as session:
        for i, request in enumerate(requests, 1):
            result, executed = session.run(request)
            status = result.outcome if result else TIMEOUT
            progress(
                f"[{i}/{len(requests)}] {request.trace} {request.policy} "
                f"{request.budget:,} bytes: {status}{'' if executed else ' (recorded earlier)'}"
            )
    return [records.record_path(directory, r.run_id) for r in requests]
