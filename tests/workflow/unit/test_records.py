"""Execution records (schema, append-only atomic files, gathering) and the guarded runner."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import llvmlite.binding as llvm
import pyarrow.parquet as pq
import pytest

from dtrholes.core import provenance
from dtrholes.study import records, runner
from dtrholes.study.records import RecordError
from dtrholes.study.runner import Session, run_requests
from simulator import simulate
from tests.support.records import (
    TRACE,
    load_tiny,
    record_for,
    request,
    session_processes,
)

INTERRUPTED_CALLER = """
import sys
from pathlib import Path
from dtrholes.study.runner import run_requests
from tests.support.records import load_slowly, request
try:
    run_requests([request(150)], load_slowly, Path(sys.argv[1]), fresh=sys.argv[2] == "fresh")
except KeyboardInterrupt:
    sys.exit("caller interrupted")
"""


def test_record_round_trip(tmp_path) -> None:
    record = record_for(150)
    path = records.write_record(record, tmp_path)
    assert path.name == f"{record['run_id']}.json"
    assert records.read_record(path) == json.loads(json.dumps(record))
    assert record["code"]["package_version"] and record["environment"]["python"]
    assert record["environment"]["cpu"] == provenance.cpu()


def test_cpu_names_the_processor_its_family_and_model() -> None:
    cpuinfo = "processor\t: 0\ncpu family\t: 23\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n" * 2
    named = provenance.cpu(cpuinfo)
    assert named.startswith("AMD EPYC, family 23 model 1, ")
    assert named.endswith(f" CPUs, compiled for {llvm.get_host_cpu_name()}")
    assert "family" not in provenance.cpu("model name\t: Some CPU\n")


def test_records_are_append_only(tmp_path) -> None:
    records.write_record(record_for(150), tmp_path)
    with pytest.raises(RecordError, match="a record with this run id"):
        records.write_record(record_for(150), tmp_path)


def test_run_id_depends_on_what_defines_the_execution() -> None:
    base = request(150)
    variants = [request(151), request(150, "lru"), request(150, stage="B"), request(150, guard_s=9)]
    assert len({base.run_id, *(v.run_id for v in variants)}) == 5
    assert request(150).run_id == base.run_id
    relabelled = dataclasses.replace(base, protocol_version="abc", amendments=("x",))
    assert relabelled.run_id == base.run_id  # a later protocol version reuses the record


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["result"].update(outcome=3), "result/outcome|result"),
        (lambda r: r.update(status="finished"), "status"),
        (lambda r: r.pop("budget"), "budget"),
        (lambda r: r.update(result=None), "result"),
    ],
)
def test_invalid_records_name_the_file_and_field(tmp_path, edit, message) -> None:
    record = record_for(150)
    edit(record)
    path = tmp_path / f"{record['run_id']}.json"
    path.write_text(json.dumps(record))
    with pytest.raises(RecordError) as info:
        records.read_record(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def _mutants(value: object):
    """`value` with one leaf or member replaced by each wrong-typed value, deleted, or joined by
    an unknown key."""
    wrong = [None, True, -1, 1.5, 2.0, "x", "2026-13-99", [], {}, [1.5], float("inf")]
    if isinstance(value, dict):
        yield {**value, "unknown": 1}
        for key, member in value.items():
            yield {k: v for k, v in value.items() if k != key}
            for m in (*wrong, *_mutants(member)):
                yield {**value, key: m}
    elif isinstance(value, list):
        for i, member in enumerate(value):
            for m in (*wrong, *_mutants(member)):
                yield [*value[:i], m, *value[i + 1 :]]


@pytest.mark.parametrize("outcome", ["ok", "oom"])
def test_fast_check_accepts_only_what_the_validator_accepts(outcome) -> None:
    record = record_for(10**6 if outcome == "ok" else 120)
    assert record["result"]["outcome"] == outcome
    record = json.loads(json.dumps(record))
    verdicts = set()
    for mutant in _mutants(record):
        try:
            records.validate(mutant, "mutant")
            accepted = True
        except RecordError:
            accepted = False
        assert accepted == records._validator().is_valid(mutant), mutant
        verdicts.add(accepted)
    assert verdicts == {True, False}


def test_truncated_record_is_an_error(tmp_path) -> None:
    path = records.write_record(record_for(150), tmp_path)
    path.write_text(path.read_text()[:40])
    with pytest.raises(RecordError, match="readable JSON"):
        records.read_record(path)


def test_gather_tabulates_every_record(tmp_path) -> None:
    for budget in (120, 150, 10**6):
        records.write_record(record_for(budget), tmp_path / "records")
    listed = records.read_records(tmp_path / "records")
    assert records.gather(listed, tmp_path / "records.parquet") == 3
    table = pq.read_table(tmp_path / "records.parquet").to_pylist()
    assert sorted(row["budget"] for row in table) == [120, 150, 10**6]
    assert all(row["outcome"] in {"ok", "oom", "thrashed"} for row in table)


def test_runner_writes_one_record_per_request_and_resumes(tmp_path) -> None:
    requests = [request(b) for b in (120, 150, 10**6)]
    first = run_requests(requests[:2], load_tiny, tmp_path, progress=lambda _: None)
    lines: list[str] = []
    paths = run_requests(requests, load_tiny, tmp_path, progress=lines.append)
    assert paths[:2] == first and len(lines) == 3
    assert sum("recorded earlier" in line for line in lines) == 2  # only the missing one ran
    for req, path in zip(requests, paths, strict=True):
        record = records.read_record(path)
        expected = simulate(TRACE, req.budget, "dtr").to_dict()
        assert record["status"] == "complete" and record["result"] == expected


@pytest.mark.parametrize("fresh", [False, True])
def test_runner_records_a_timeout_when_the_guard_expires(tmp_path, fresh) -> None:
    requests = [request(150, guard_s=1e-9), request(170)]
    paths = run_requests(requests, load_tiny, tmp_path, fresh=fresh, progress=print)
    timeout, after = (records.read_record(path) for path in paths)
    assert timeout["status"] == "timeout" and timeout["result"] is None
    assert after["result"] == simulate(TRACE, 170, "dtr").to_dict()  # the session goes on


@pytest.mark.parametrize("fresh", [False, True])
def test_a_run_whose_process_dies_is_an_error_not_a_wait(tmp_path, fresh) -> None:
    with Session(load_tiny, tmp_path, fresh=fresh) as session:
        with pytest.raises(RuntimeError, match="died"):
            session.run(request(-5))  # the simulator refuses the budget: its process exits
        assert session.run(request(150))[0] == simulate(TRACE, 150, "dtr")  # a new worker
    assert not (tmp_path / f"{request(-5).run_id}.json").exists()


@pytest.mark.parametrize("fresh", [False, True])
def test_an_interrupted_session_leaves_at_once_and_only_its_caller_reports_it(
    tmp_path, fresh
) -> None:
    """Ctrl-C reaches the whole process group: the worker exits without a traceback, the
    caller does not wait for the run and records nothing for it."""
    caller = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_CALLER, str(tmp_path), "fresh" if fresh else "reused"],
        cwd=Path(__file__).resolve().parents[3],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert caller.stdout.readline() == "loading\n"
    os.killpg(caller.pid, signal.SIGINT)
    _, stderr = caller.communicate(timeout=30)  # the worker's 120 s load is not waited for
    assert caller.returncode == 1 and stderr == "caller interrupted\n"
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("fresh", [False, True])
def test_a_killed_callers_worker_stops_with_it(tmp_path, fresh) -> None:
    """kill -9 of the caller alone (a job whose Snakemake was killed is killed this way by
    the kernel): its worker, busy loading, does not go on computing for nobody."""
    caller = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_CALLER, str(tmp_path), "fresh" if fresh else "reused"],
        cwd=Path(__file__).resolve().parents[3],
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert caller.stdout.readline() == "loading\n"
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 10
    while session_processes(caller.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not session_processes(caller.pid)


def test_fresh_sessions_run_each_request_in_a_new_process(tmp_path) -> None:
    with Session(load_tiny, tmp_path, fresh=True) as session:
        first, executed = session.run(request(150))
        session.run(request(170))
        again, executed_again = session.run(request(150))
        template = session.worker.process.pid
    assert executed and not executed_again and again == first == simulate(TRACE, 150, "dtr")
    pids = [records.read_record(tmp_path / f"{request(b).run_id}.json")["pid"] for b in (150, 170)]
    assert len({*pids, template, os.getpid()}) == 4  # neither the template nor this process


@pytest.mark.parametrize("fresh", [False, True])
def test_a_runs_wall_time_leaves_out_its_policys_inputs(tmp_path, monkeypatch, fresh) -> None:
    """A first ranking (minutes on the largest traces) is computed before the run is timed."""

    def slow_inputs(trace, policy, params, results_dir=None):
        time.sleep(2)

    monkeypatch.setattr(runner.betweenness, "for_policy", slow_inputs)  # forked workers see it
    with Session(load_tiny, tmp_path, fresh=fresh) as session:
        session.run(request(150))
    record = records.read_record(tmp_path / f"{request(150).run_id}.json")
    assert record["result"] == simulate(TRACE, 150, "dtr").to_dict() and record["wall_s"] < 1
