"""Audit of a results directory: every claim in its tables derived again from execution records."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import multiprocessing as mp
import os
import random
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from dtrholes import (
    claims,
    evidence,
    explain,
    fetch,
    files,
    holes,
    maps,
    paths,
    plan,
    processes,
    records,
    runner,
)
from simulator import Result, Trace, UserError, parse_trace

SEED = 20261129
# The rule writing each kind of job output (a merged map states what its chunks state).
REBUILT_BY = {
    paths.SAMPLES: "sweep_stage",
    paths.EDGES: "find_edges",
    paths.REPEATS: "repeat_regions",
    paths.MAPS: "map_chunk",
}
TITLES = {
    "records": "every record file is a valid, unique record; every listed record exists, with"
    " the bytes whose sha256 its job output states",
    "provenance": "trace bytes and checksums, protocol versions and code versions are on file",
    "claims": "the records table, job outputs and tables are derived again from the records",
    "re-execution": "a seeded sample of records, region edge points included, reruns identically",
    "maps": "map tiles cover their ranges once, match their records, and random budgets inside"
    " random tiles rerun to the tile's outcome",
    "explanations": "every explained pair states its two runs as the records it cites hold them,"
    " records a job output lists, and its mechanism summary as its parts give it",
    "evidence": "every execution ever recorded is in the evidence table, with its status",
}
MAP_DRAWS = 3  # tiles per map whose random inner budget the audit reruns


@dataclass(frozen=True)
class Failure:
    """One failed item of a check: where (a record, file or table row) and what is wrong."""

    check: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.where}: {self.message}"


@dataclass(frozen=True)
class Check:
    """One check's verdict: how many items it checked, every failure, and notes."""

    name: str
    count: int
    failures: tuple[Failure, ...]
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    def __str__(self) -> str:
        if self.passed:
            return f"{self.name}: passed ({self.count:,} checked)"
        first = self.failures[0]
        return (
            f"{self.name} FAILED ({len(self.failures):,} of {self.count:,}):"
            f" {first.where}: {first.message}"
        )


@dataclass(frozen=True)
class Options:
    """What to audit and how: `protocol` is the rendered protocol the tables were made under
    (default: the latest under results/protocol); `sample` records rerun besides edge points
    (None: every record), by `workers` processes."""

    results: Path
    data: Path
    sheet: Path
    protocol: Path | None = None
    sample: int | None = 20
    seed: int = SEED
    workers: int = 1


@dataclass(frozen=True)
class Context:
    """What the checks read, loaded once; traces are parsed from the archive when needed."""

    options: Options
    inv: evidence.Inventory | None  # None in a rerun worker, which reads no records
    sheet: dict[str, fetch.TraceEntry]
    traces: dict[str, Trace | str] = field(default_factory=dict)  # parsed, or why not


def load(options: Options) -> Context:
    inv = evidence.inventory(options.results, options.protocol)
    return Context(options, inv, {e.name: e for e in fetch.read_sheet(options.sheet)})


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]
    evidence: list[dict]
    sample: tuple[str, ...]
    seconds: float

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


# 1. records ---------------------------------------------------------------------------------


def check_records(ctx: Context) -> Check:
    failures = [x for f in ctx.inv.files for x in _file_failures(f)]
    failures += _duplicates(ctx.inv.files)
    for rel, run_ids in ctx.inv.outputs.items():
        failures += _listed_failures(ctx, rel, run_ids)
    digests = {f.record["run_id"]: f.sha256 for f in ctx.inv.files if f.canonical}
    for rel, run_ids in [*ctx.inv.outputs.items(), *ctx.inv.maps.items()]:
        failures += _checksum_failures(rel, run_ids, ctx.inv.sha256.get(rel), digests)
    partial = sum(f.partial for f in ctx.inv.files)
    notes = (f"{partial} partial files of interrupted writes (no record)",) if partial else ()
    return Check("records", len(ctx.inv.files), tuple(failures), notes)


def _file_failures(f: evidence.RecordFile) -> list[Failure]:
    if f.partial:
        return []
    if f.record is None:
        return [Failure("records", f"record {f.path.stem}", f"{f.path.name}: {f.problem}")]
    run_id = f.record["run_id"]
    if not f.canonical:
        found = f"file {f.path.name} holds record {run_id}: a duplicate under another name"
        return [Failure("records", f"record {run_id}", found)]
    problem = _request_problem(f.record)
    return [Failure("records", f"record {run_id}", problem)] if problem else []


def _request_problem(record: dict) -> str | None:
    """Why a record is not the record of its own request, if it is not."""
    try:
        request = records.request_of(record)
    except UserError as exc:
        return f"its request is invalid ({exc})"
    if request.run_id != record["run_id"]:
        return f"its run id is not the hash of its request (that is {request.run_id})"
    result = record["result"]
    if result is None:
        return None
    asked = {
        "trace_sha256": request.trace_sha256,
        "policy": request.policy,
        "params": dict(request.params),
        "budget": request.budget,
        "overhead_cap": request.overhead_cap,
    }
    wrong = [k for k, v in asked.items() if result[k] != v]
    return f"its result answers another request ({', '.join(wrong)})" if wrong else None


def _duplicates(files: list[evidence.RecordFile]) -> list[Failure]:
    held = Counter(f.record["run_id"] for f in files if f.record is not None)
    return [
        Failure("records", f"record {run_id}", f"duplicate run id: {n} files hold it")
        for run_id, n in sorted(held.items())
        if n > 1
    ]


def _listed_failures(ctx: Context, rel: str, run_ids: list[str]) -> list[Failure]:
    listing = paths.listing(rel)
    failures = []
    for run_id in run_ids:
        record = ctx.inv.records.get(run_id)
        if record is None:
            failures.append(Failure("records", f"record {run_id}", f"listed by {rel}, missing"))
            continue
        found = (record["stage"], record["trace"]["name"], record["policy"]["name"])
        if found != (listing.stage, listing.trace, listing.policy):
            message = f"listed by {rel} but a {'/'.join(found)} run"
            failures.append(Failure("records", f"record {run_id}", message))
    return failures


def _checksum_failures(
    rel: str, run_ids: list[str], stated: dict[str, str] | None, digests: dict[str, str]
) -> list[Failure]:
    """Each listed record file whose bytes are not those the job output states (a missing
    one is reported as missing)."""
    if stated is None:
        rule = REBUILT_BY[paths.listing(rel).kind]
        message = (
            "written before job outputs stated their records' sha256: rebuild it from its"
            f" records (none is rerun) with `snakemake --forcerun {rule}`"
        )
        return [Failure("records", rel, message)]
    failures = []
    for run_id in dict.fromkeys(run_ids):
        found, wanted = digests.get(run_id), stated.get(run_id)
        if found is not None and found != wanted:
            message = (
                f"file records/{run_id}.json has sha256 {found}, {rel} states"
                f" {wanted or 'none'}: edited after the job wrote it"
            )
            failures.append(Failure("records", f"record {run_id}", message))
    return failures


# 2. provenance ------------------------------------------------------------------------------


def check_provenance(ctx: Context) -> Check:
    failures = [x for r in ctx.inv.records.values() for x in _record_provenance(ctx, r)]
    users: dict[str, list[str]] = defaultdict(list)
    for r in ctx.inv.records.values():
        users[r["trace"]["name"]].append(r["run_id"])
    for name, run_ids in sorted(users.items()):
        problem = _trace_problem(ctx, name)
        if problem:
            where = f"record {run_ids[0]} (and {len(run_ids) - 1} more of trace {name})"
            failures.append(Failure("provenance", where, problem))
    failures += _shared_processes(ctx)
    return Check("provenance", len(ctx.inv.records), tuple(failures), _code_notes(ctx))


def _shared_processes(ctx: Context) -> list[Failure]:
    """Repeats of one point that name the same process (of those recording it): each must
    have run in a new one."""
    first: dict[tuple, str] = {}
    failures = []
    for r in ctx.inv.records.values():
        if r["stage"] != paths.REPEAT or r.get("pid") is None:
            continue
        try:
            point = dataclasses.replace(records.request_of(r), repeat=0).run_id
        except UserError:
            continue  # the records check reports its request
        other = first.setdefault((point, r["environment"]["host"], r["pid"]), r["run_id"])
        if other != r["run_id"]:
            message = f"a repeat that ran in the process of repeat {other}, not a new one"
            failures.append(Failure("provenance", f"record {r['run_id']}", message))
    return failures


def _record_provenance(ctx: Context, record: dict) -> list[Failure]:
    problems = []
    name, sha = record["trace"]["name"], record["trace"]["sha256"]
    entry = ctx.sheet.get(name)
    if entry is None or entry.sha256 != sha:
        stated = entry.sha256 if entry else "no such trace"
        problems.append(f"trace {name} sha256 {sha} is not the trace sheet's ({stated})")
    version = record["protocol"]["version"]
    render = ctx.inv.renders.get(version)
    if render is None:
        problems.append(f"protocol version {version} has no rendered protocol")
    else:
        known = {a["id"] for a in render["history"]}
        unknown = sorted(set(record["protocol"]["amendments"]) - known)
        if unknown:
            problems.append(f"amendments {unknown} are not in protocol {version}'s history")
    if not record["code"]["git_commit"]:
        problems.append("its code version names no git commit")
    return [Failure("provenance", f"record {record['run_id']}", p) for p in problems]


def _code_notes(ctx: Context) -> tuple[str, ...]:
    # Records from before the lock lack its key; one commit may have run in two environments.
    versions = Counter(
        (c["package_version"], c["git_commit"], c["git_dirty"], c.get("lock_sha256"))
        for c in (r["code"] for r in ctx.inv.records.values())
    )
    return tuple(
        f"{n} records from dtr-holes {package} at commit {commit}"
        + (f", requirements.lock sha256 {lock[:12]}" if lock else "")
        + (" (DIRTY: tracked files differed from the commit)" if dirty else "")
        for (package, commit, dirty, lock), n in sorted(versions.items(), key=str)
    )


def _trace_problem(ctx: Context, name: str) -> str | None:
    found = trace_of(ctx, name)
    return found if isinstance(found, str) else None


def trace_of(ctx: Context, name: str) -> Trace | str:
    """The trace parsed from the archive's bytes, or why it cannot be trusted."""
    if name not in ctx.traces:
        ctx.traces[name] = _parse(ctx.options, ctx.sheet, name)
    return ctx.traces[name]


def _parse(options: Options, sheet: dict[str, fetch.TraceEntry], name: str) -> Trace | str:
    entry = sheet.get(name)
    if entry is None:
        return f"trace {name} is not in the trace sheet"
    archive = options.data / fetch.ARCHIVE_NAME
    if not archive.is_file():
        fetch.fetch_archive(options.data, sheet=options.sheet)
    try:
        with zipfile.ZipFile(archive) as z:
            data = z.read(entry.member)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        return f"{archive}:{entry.member} is unreadable ({exc})"
    found = hashlib.sha256(data).hexdigest()
    if found != entry.sha256:
        return f"{archive}:{entry.member} has sha256 {found}, the trace sheet {entry.sha256}"
    return parse_trace(data, f"{archive}:{entry.member}", name)


# 3. claims ----------------------------------------------------------------------------------


def check_claims(ctx: Context) -> Check:
    count, problems = claims.check(ctx.inv)
    return Check("claims", count, tuple(Failure("claims", *p) for p in problems))


# 4. re-execution ----------------------------------------------------------------------------


def sample(ctx: Context) -> tuple[list[str], list[str]]:
    """The records to rerun: the region edge points, then a seeded random sample of the other
    complete current records (with no sample size: every complete record the results cite,
    maps' included); and the timeouts left out."""
    current = ctx.inv.current()
    edge = edge_points(ctx, [r for r in current if r["status"] == "complete"])
    pool = current if ctx.options.sample is not None else _cited_records(ctx)
    rest = sorted({r["run_id"] for r in pool if r["status"] == "complete"} - set(edge))
    wanted = len(rest) if ctx.options.sample is None else min(ctx.options.sample, len(rest))
    picked = random.Random(ctx.options.seed).sample(rest, wanted)
    timeouts = sorted({r["run_id"] for r in pool if r["status"] == "timeout"})
    return edge + sorted(picked), timeouts


def _cited_records(ctx: Context) -> list[dict]:
    return [ctx.inv.records[i] for i in ctx.inv.cited() if i in ctx.inv.records]


def edge_points(ctx: Context, complete: list[dict]) -> list[str]:
    """Per region of the holes table: the first record at each bracket budget (ok below, first
    and last failing, ok above) and the runs that bound each exact edge."""
    try:
        table = holes.read_rows(paths.table("holes", root=ctx.inv.results))
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
    return ended == outcome and (ended != "thrashed" or record["overhead_cap"] == cap)


def _first(candidates: list[dict], test) -> list[str]:
    return next(([r["run_id"]] for r in candidates if test(r)), [])


def _top(record: dict) -> int:
    result = record["result"]
    return result["budget_hi"] if result["budget_hi"] is not None else result["budget"]


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
    request = records.request_of(record)
    result = runner.execute(request, trace, ctx.options.results).to_dict()
    again, stated = _canonical(result), _canonical(record["result"])
    if again == stated:
        return []
    found = claims.difference(json.loads(stated), json.loads(again))
    if found is None:
        return [Failure("re-execution", where, "rerun gives a Result with other bytes")]
    path, a, b = found
    message = (
        f"rerun gives another Result: {path}: recorded {claims.short(a)}, rerun {claims.short(b)}"
    )
    return [Failure("re-execution", where, message)]


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# 5. maps -----------------------------------------------------------------------------------


def check_maps(ctx: Context) -> Check:
    """Every merged map: its tiling (no gap, no overlap), each run tile against its record,
    and a seeded few random budgets inside random tiles rerun to the tile's outcome."""
    found = sorted(ctx.options.results.glob(paths.MAP_GLOB))
    rng = random.Random(ctx.options.seed)
    failures, count = [], 0
    for path in found:
        where = str(path.relative_to(ctx.options.results))
        try:
            m = maps.read(path)
        except UserError as exc:
            failures.append(Failure("maps", where, str(exc)))
            continue
        count += len(m.tiles)
        failures += [f for t in m.tiles for f in _tile_failures(ctx, where, m, t)]
        exact = [t for t in m.tiles if t.exact]
        for t in rng.sample(exact, min(MAP_DRAWS, len(exact))):
            failures += _redraw(ctx, where, m, t, rng.randint(t.first, t.last))
    return Check("maps", count, tuple(failures), (f"{len(found)} maps",))


def _tile_failures(ctx: Context, where: str, m: maps.Map, t: maps.Tile) -> list[Failure]:
    if t.run_id is None:
        return []
    record = ctx.inv.records.get(t.run_id)
    at = f"{where}: tile {t.first:,}..{t.last:,}"
    if record is None:
        return [Failure("maps", at, f"run {t.run_id} has no record")]
    result = record["result"] or {}
    stated = (record["stage"], record["trace"]["name"], record["policy"]["name"], record["budget"])
    outcome = result.get("outcome", maps.TIMEOUT)
    if stated != (paths.MAP, m.trace, m.policy, t.run_budget) or outcome != t.outcome:
        return [Failure("maps", at, f"record {t.run_id} is another run: {stated}, {outcome}")]
    hi = result.get("budget_hi")
    if t.exact and not (result["budget_lo"] <= t.first and (hi is None or t.last <= hi)):
        return [Failure("maps", at, f"outside the certified interval of record {t.run_id}")]
    return []


def _redraw(ctx: Context, where: str, m: maps.Map, t: maps.Tile, budget: int) -> list[Failure]:
    trace = trace_of(ctx, m.trace)
    if isinstance(trace, str) or t.run_id not in ctx.inv.records:
        return []  # reported by the provenance check and the tile's record check
    request = records.request_of(ctx.inv.records[t.run_id])
    request = dataclasses.replace(request, budget=budget)
    result = runner.execute(request, trace, ctx.options.results)
    if (result.outcome, result.overhead) == (t.outcome, t.overhead):
        return []
    message = f"budget {budget:,} reruns to {result.outcome}, the tile says {t.outcome}"
    return [Failure("maps", f"{where}: tile {t.first:,}..{t.last:,}", message)]


# 6. explanations ---------------------------------------------------------------------------


def check_explanations(ctx: Context) -> Check:
    """Every explained pair states its two runs as the records it cites have them, records a
    current job output lists (and so states the sha256 of), and its mechanism summary (budget
    difference and all) as its parts give it."""
    found = sorted((ctx.options.results / "explain").glob("*/*/explain.json"))
    listed = ctx.inv.cited()
    failures, count = [], 0
    for path in found:
        where = str(path.relative_to(ctx.options.results))
        for i, pair in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            count += 1
            problems = [_cited_problem(ctx, pair, run, listed) for run in ("ok", "fail")]
            for problem in [*problems, mechanism_problem(pair)]:
                if problem:
                    failures.append(Failure("explanations", f"{where}: pair {i}", problem))
    return Check("explanations", count, tuple(failures), (f"{len(found)} files",))


def mechanism_problem(pair: dict) -> str | None:
    """Whether an explanation's mechanism summary is not what its other parts give."""
    try:
        derived = explain.mechanism(pair)
    except (KeyError, TypeError, ValueError) as exc:  # an explanation edited out of shape
        return f"its mechanism summary cannot be derived from its parts ({type(exc).__name__})"
    if pair.get("mechanism") != derived:
        return "its mechanism summary is not what its divergence, cascade and retention give"
    return None


def _cited_problem(ctx: Context, pair: dict, run: str, listed: dict[str, list[str]]) -> str | None:
    run_id = pair["cites"][run]
    record = ctx.inv.records.get(run_id)
    if record is None:
        return f"the {run} run cites {run_id}, which has no record"
    if run_id not in listed:
        return f"the {run} run cites {run_id}, which no current job output lists"
    result = record["result"]
    stated = explain.summary(Result.from_dict(result), pair["peak_memory"]) if result else None
    if record["trace"]["name"] != pair["trace"] or stated != pair[run]:
        return f"the {run} run is not what record {run_id} holds"
    return None


# 7. evidence and the report -----------------------------------------------------------------


def check_evidence(table: list[dict]) -> Check:
    statuses = Counter(row["status"] for row in table)
    notes = tuple(f"{n} {status}" for status, n in sorted(statuses.items()))
    return Check("evidence", len(table), (), notes)


def run(
    options: Options, clock: Callable[[], float], progress: Callable[[str], None] = print
) -> Report:
    """Every check on `options.results`, each verdict reported as it is reached; `clock` times
    the audit."""
    start = clock()
    ctx = load(options)
    table = evidence.rows(ctx.inv.files, ctx.inv.cited(), ctx.inv.rendered["version"])
    picked = sample(ctx)
    checks = []
    for check in (
        check_records,
        check_provenance,
        check_claims,
        functools.partial(check_reexecution, picked=picked, progress=progress),
        check_maps,
        check_explanations,
        lambda _: check_evidence(table),
    ):
        checks.append(check(ctx))
        progress(str(checks[-1]))
    return Report(tuple(checks), table, tuple(picked[0]), clock() - start)


def to_json(report: Report) -> dict:
    return {
        "passed": report.passed,
        "seconds": round(report.seconds, 3),
        "rerun": list(report.sample),
        "checks": [
            {
                "name": c.name,
                "title": TITLES[c.name],
                "passed": c.passed,
                "count": c.count,
                "failures": [{"where": f.where, "message": f.message} for f in c.failures],
                "notes": list(c.notes),
            }
            for c in report.checks
        ],
    }


def markdown(report: Report) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    lines = [
        f"# Audit: {verdict}",
        "",
        f"{len(report.checks)} checks in {report.seconds:.1f} s.",
        "",
        "| check | what | items | failures |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {c.name} | {TITLES[c.name]} | {c.count} | {len(c.failures)} |" for c in report.checks
    ]
    for c in report.checks:
        lines += ["", f"## {c.name}: {'passed' if c.passed else 'FAILED'}", ""]
        lines += [f"- {f.where}: {f.message}" for f in c.failures] or ["- no failures"]
        lines += [f"- note: {note}" for note in c.notes]
    lines += ["", "## Executions not cited by the current results", ""]
    lines += ["| run id | status | reason |", "|---|---|---|"]
    lines += [
        f"| {row['run_id']} | {row['status']} | {row['reason']} |"
        for row in report.evidence
        if row["status"] != "current"
    ]
    return "\n".join(lines) + "\n"


def write(report: Report, markdown_out: Path, json_out: Path, evidence_out: Path) -> None:
    """The report as Markdown and JSON, and the evidence table as CSV."""
    files.write_text(markdown_out, markdown(report))
    files.write_text(json_out, json.dumps(to_json(report), indent=1) + "\n")
    evidence.write_csv(report.evidence, evidence_out)
