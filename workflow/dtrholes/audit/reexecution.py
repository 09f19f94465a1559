"""The re-execution check: a seeded sample of records, edge points included, reruns identically."""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import random
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from dtrholes.audit import claims
from dtrholes.audit.context import Check, Context, Failure, Options, trace_of
from dtrholes.core import paths, processes
from dtrholes.core.samples import COMPLETE
from dtrholes.holes import sampled_holes
from dtrholes.study import plan, records, runner
from dtrholes.traces import fetch
from simulator import UserError, get_policy
from simulator.result import THRASHED, TIMEOUT, interval_top


def sample(ctx: Context) -> tuple[list[str], list[str]]:
    """The records to rerun: the region edge points, then a seeded random sample of the other
    complete current records (with no sample size: every complete record the results cite,
    maps' included); and the timeouts left out."""
    current = ctx.inv.current()
    edge = edge_points(ctx, [r for r in current if r["status"] == COMPLETE])
    pool = current if ctx.options.sample is not None else _cited_records(ctx)
    rest = sorted({r["run_id"] for r in pool if r["status"] == COMPLETE} - set(edge))
    wanted = len(rest) if ctx.options.sample is None else min(ctx.options.sample, len(rest))
    picked = random.Random(ctx.options.seed).sample(rest, wanted)
    timeouts = sorted({r["run_id"] for r in pool if r["status"] == TIMEOUT})
    return edge + sorted(picked), timeouts


def _cited_records(ctx: Context) -> list[dict]:
    return [ctx.inv.records[i] for i in ctx.inv.cited() if i in ctx.inv.records]


def edge_points(ctx: Context, complete: list[dict]) -> list[str]:
    """Per region of the holes table: the first record at each bracket budget (ok below, first
    and last failing, ok above) and the runs that bound each exact edge."""
    try:
        table = sampled_holes.read_rows(paths.table("holes", root=ctx.inv.results))
    except UserError:
        return []
    found: list[str] = []
    for row in table:
        series = (row["trace"], row["policy"])
        mine = [r for r in complete if (r["trace"]["name"], r["policy"]["name"]) == series]
        for region in json.loads(row["region_brackets"]):
            for budget in (region[k] for k in ("ok_below", "first_fail", "last_fail", "ok_above")):
                found += _first(
                    mine, lambda r, b=budget: r["budget"] == b and plan.is_sample(r["stage"])
                )
        cap = next((r["overhead_cap"] for r in mine if plan.is_sample(r["stage"])), None)
        for e in json.loads(row["exact_edges"]):
            found += _bounding(mine, e, cap)
    return list(dict.fromkeys(found))


def _bounding(candidates: list[dict], edge: dict, cap: float | None) -> list[str]:
    """The first records of the runs certified to end as the edge says just below and just
    above it (under the samples' cap)."""
    below = _first(
        candidates, lambda r: _top(r) == edge["below"] and _ends(r, edge["outcome_below"], cap)
    )
    above = _first(
        candidates,
        lambda r: (
            r["result"]["budget_lo"] == edge["above"] and _ends(r, edge["outcome_above"], cap)
        ),
    )
    return below + above


def _ends(record: dict, outcome: str, cap: float | None) -> bool:
    """Whether a record's run ends with `outcome` as under the samples' cap (an edge probe that
    thrashed under a lower cap may not: it is not the run that bounds the edge)."""
    ended = record["result"]["outcome"]
    return ended == outcome and (ended != THRASHED or record["overhead_cap"] == cap)


def _first(candidates: list[dict], test) -> list[str]:
    return next(([r["run_id"]] for r in candidates if test(r)), [])


def _top(record: dict) -> int:
    result = record["result"]
    return interval_top(result["budget_hi"], unbounded=result["budget"])


def check_reexecution(
    ctx: Context, picked: tuple[list[str], list[str]], progress: Callable[[str], None] = print
) -> Check:
    """Rerun the records `sample` picked; its timeouts are noted, not rerun."""
    chosen, timeouts = picked
    failures = [f for found in _reruns(ctx, chosen, progress) for f in found]
    notes = [_sampled(ctx.options)]
    if timeouts:
        notes.append(f"{len(timeouts)} timeout records not rerun: {', '.join(timeouts)}")
    return Check("re-execution", len(chosen), tuple(failures), tuple(notes))


def _sampled(options: Options) -> str:
    if options.sample is None:
        return "every complete record the results cite rerun (maps' included)"
    return f"seed {options.seed}, {options.sample} sampled besides edge points"


def _reruns(
    ctx: Context, chosen: list[str], progress: Callable[[str], None]
) -> list[list[Failure]]:
    """Each chosen record's rerun failures, in `chosen` order, with a count every twentieth
    of the way; with several workers (at most the CPUs this process may use), each in a
    process of its own, the costliest (by recorded CPU time) handed out first."""
    found = [ctx.inv.records[run_id] for run_id in chosen]
    workers = min(ctx.options.workers, len(os.sched_getaffinity(0)), len(found))
    order = sorted(range(len(found)), key=lambda i: -found[i]["cpu_s"])
    with contextlib.ExitStack() as stack:
        if workers < 2:
            answers = (_rerun(ctx, found[i]) for i in order)
        else:
            init = (ctx.options, ctx.sheet)
            context = mp.get_context("spawn")
            pool = stack.enter_context(ProcessPoolExecutor(workers, context, _start_worker, init))
            answers = pool.map(_rerun_in_worker, [found[i] for i in order])
        done = {}
        for i, answer in zip(order, answers, strict=True):
            done[i] = answer
            if len(done) % max(1, len(found) // 20) == 0 or len(done) == len(found):
                progress(f"re-execution: {len(done):,} of {len(found):,} records rerun")
    return [done[i] for i in range(len(found))]


_WORKER: list[Context] = []  # a rerun worker process's context: options, sheet, parsed traces


def _start_worker(options: Options, sheet: dict[str, fetch.TraceEntry]) -> None:
    processes.exit_with_parent(mp.parent_process().pid)
    _WORKER.append(Context(options, None, sheet))


def _rerun_in_worker(record: dict) -> list[Failure]:
    return _rerun(_WORKER[0], record)


def _rerun(ctx: Context, record: dict) -> list[Failure]:
    where = f"record {record['run_id']}"
    name = record["trace"]["name"]
    trace = trace_of(ctx, name)
    if isinstance(trace, str):
        message = f"not rerun: trace {name} is not the one on file (see provenance)"
        return [Failure("re-execution", where, message)]
    try:
        request = records.request_of(record)
    except UserError as error:  # a policy file gone or broken
        return [Failure("re-execution", where, f"not rerun: {error}")]
    if request.policy_source is not None:
        now = get_policy(request.policy_source).source_sha256
        if now != request.policy_sha256:
            message = (
                f"not rerun: policy file {request.policy_source} has sha256 {now}, the record"
                f" {request.policy_sha256}"
            )
            return [Failure("re-execution", where, message)]
    result = runner.execute(request, trace, ctx.options.results).to_dict()
    again, stated = _canonical(result), _canonical(record["result"])
    if again == stated:
        return []
    found = claims.difference(json.loads(stated), json.loads(again))
    if found is None:
        return [Failure("re-execution", where, "rerun gives a Result with other bytes")]
    path, a, b = found
    recorded, rerun = claims.short(a), claims.short(b)
    message = f"rerun gives another Result: {path}: recorded {recorded}, rerun {rerun}"
    return [Failure("re-execution", where, message)]


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
