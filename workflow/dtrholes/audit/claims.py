"""The claims check: the records table, edges, repeats and tables derived again from the records."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dtrholes.audit import inventory
from dtrholes.audit.context import Check, Context, Failure
from dtrholes.core import paths
from dtrholes.holes import map_tables, maps, sampled_holes
from dtrholes.pipeline import stages
from dtrholes.report import hypotheses
from dtrholes.report.paper import comparison, output, published
from dtrholes.study import plan, protocol, records, simrd
from simulator import Result, UserError
from simulator.result import TIMEOUT

RECORDS = paths.records_table(root="")  # the records table, as failures name it


def check_claims(ctx: Context) -> Check:
    """How many rows and job outputs were derived again, and every one that differs."""
    inv = ctx.inv
    failures = [_fail(where, message) for where, message in inv.unreadable.items()]
    count = 0
    rows = records.table(inv.current()).to_pylist()
    parts = (_records_table, _job_replays, _holes, _comparison, _crosscheck, _paper, _maps)
    for part in parts:
        checked, found = _guarded(part, inv, rows)
        count += checked
        failures += found
    return Check("claims", count, tuple(failures))


def _fail(where: str, message: str) -> Failure:
    """A claim that differs: where (a record, job output or table row) and how."""
    return Failure("claims", where, message)


def _guarded(
    part: Callable, inv: inventory.Inventory, rows: list[dict]
) -> tuple[int, list[Failure]]:
    """A part of the claims check; an error it meets (a disagreeing repeat, a damaged job
    output) is a failure of the check, not of the audit."""
    try:
        return part(inv, rows)
    except (UserError, OSError, ValueError, KeyError, TypeError) as exc:
        return 1, [_fail(PARTS[part.__name__], f"cannot be derived again: {exc}")]


PARTS = {
    "_records_table": RECORDS,
    "_job_replays": "edges and repeats",
    "_holes": "tables/holes",
    "_comparison": "tables/comparison",
    "_crosscheck": "tables/crosscheck",
    "_paper": "tables/paper",
    "_maps": "tables/maps",
}


def _records_table(inv: inventory.Inventory, rows: list[dict]) -> tuple[int, list[Failure]]:
    try:
        stated = sampled_holes.read_rows(paths.records_table(inv.results))
    except UserError as exc:
        return 1, [_fail(RECORDS, str(exc))]
    failures = _compare_rows(RECORDS, stated, rows, lambda r: r["run_id"], lambda k: f"record {k}")
    return len(stated), [_fail(f.where, f"{RECORDS}: {f.message}") for f in failures]


def _by_kind(inv: inventory.Inventory) -> dict[tuple[str, str], dict[str, list[str]]]:
    """Per trace × policy: its job outputs by kind (sampled, edges, repeats)."""
    found: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for rel in inv.outputs:
        listing = paths.listing(rel)
        found[listing.trace, listing.policy][listing.kind].append(rel)
    return found


def _of_kind(inv: inventory.Inventory, kind: str) -> list[Path]:
    """The current job outputs of one kind (edges, repeats)."""
    return [inv.results / rel for rel in inv.outputs if paths.listing(rel).kind == kind]


def _job_replays(inv: inventory.Inventory, rows: list[dict]) -> tuple[int, list[Failure]]:
    """Edges and repeats derived again by replaying their jobs from the records alone."""
    count, failures = 0, []
    for (trace, policy), kinds in sorted(_by_kind(inv).items()):
        series = inv.listed(kinds[paths.SAMPLES])
        for kind, derive, key in (
            (paths.EDGES, stages.find_edges, "edges"),
            (paths.REPEATS, stages.repeat_regions, "regions"),
        ):
            for rel in kinds[kind]:
                count += 1
                failures += _replay(inv, rel, derive, key, _job(inv, trace, policy, kind), series)
    return count, failures


def _replay(inv, rel, derive, key, job, series) -> list[Failure]:
    try:
        found, run_ids = derive(job, series, progress=lambda _: None)
    except UserError as exc:
        return [_fail(rel, str(exc))]
    stated = stages.read_output(inv.results / rel)
    stated.pop(records.SHA256_KEY, None)  # the records check compares them with the files
    derived = json.loads(json.dumps({key: found, "run_ids": run_ids}))
    problem = diff(stated, derived)
    return [_fail(rel, f"replayed from the records, {problem}")] if problem else []


def _job(inv: inventory.Inventory, trace: str, policy: str, kind: str) -> stages.Job:
    """The edges or repeat job of a series under the rendered protocol, answered by records."""
    rendered = inv.rendered
    current = protocol.Protocol(
        dt.date.fromisoformat(rendered["fixed"]), rendered["title"], rendered["parameters"], ()
    )
    spec = plan.job_spec(current, paths.LISTS[kind], policy)
    baseline = stages.read_output(paths.baseline(trace, inv.results))
    return ReplayJob(
        trace, policy, spec, rendered["version"], baseline, Path(), Path(), inv.results, inv.records
    )


@dataclass(frozen=True)
class ReplayJob(stages.Job):
    """A job whose runs are answered from their records; nothing is executed."""

    recorded: dict = field(default_factory=dict, compare=False)

    def session(self, fresh: bool = False) -> Replay:
        return Replay(self.recorded)


class MissingRecord(UserError):
    """A run a job made, as its replay asks for it, has no record."""


class Replay:
    """A session that answers each request from its record."""

    def __init__(self, recorded: dict[str, dict]):
        self.recorded = recorded

    def __enter__(self) -> Replay:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, request: records.Request) -> tuple[Result | None, bool]:
        record = self.recorded.get(request.run_id)
        if record is None:
            asked = f"the record of its {request.stage} run at {request.budget:,} bytes"
            raise MissingRecord(f"record {request.run_id}", asked, "none")
        result = record["result"]
        return (None if result is None else Result.from_dict(result)), False


def _holes(inv: inventory.Inventory, rows: list[dict]) -> tuple[int, list[Failure]]:
    version = inv.rendered["version"]
    found = sampled_holes.EdgesAndRepeats(
        edges=stages.by_series(_of_kind(inv, paths.EDGES), "edges"),
        repeats=stages.by_series(_of_kind(inv, paths.REPEATS), "regions"),
        protocol_version=version,
    )
    derived = sampled_holes.table_rows(rows, found)
    return _table(inv, "holes", derived, sampled_holes.markdown(derived, version), _series_key)


def _comparison(inv: inventory.Inventory, rows: list[dict]) -> tuple[int, list[Failure]]:
    derived = hypotheses.compare(rows, hypotheses.roles(inv.rendered), inv.rendered["version"])
    text = hypotheses.markdown(derived, inv.rendered["version"])
    return _table(inv, "comparison", derived, text, _series_key)


def _paper(inv: inventory.Inventory, rows: list[dict]) -> tuple[int, list[Failure]]:
    checked = sampled_holes.read_rows(paths.table("crosscheck", root=inv.results))
    found = comparison.reproduce(rows, published.load(), checked)
    derived = output.table(found).to_pylist()
    return _table(inv, "paper", derived, output.render_markdown(found), _paper_key)


def _maps(inv: inventory.Inventory, rows: list[dict]) -> tuple[int, list[Failure]]:
    """The maps table and its holes table, tabulated again from the merged maps (when any
    map or maps table is on disk: the maps are optional)."""
    if not inv.maps and not paths.table("maps", root=inv.results).exists():
        return 0, []
    found = [maps.read(inv.results / rel) for rel in sorted(inv.maps)]
    series, found_holes = map_tables.tabulate(found, rows)
    text = map_tables.markdown(series, found_holes)
    count, failures = _table(inv, "maps", series, text, _series_key)
    checked, more = _rows(inv, "map-holes", found_holes, _hole_key)
    return count + checked, failures + more


def _hole_key(row: dict) -> tuple:
    return row["trace"], row["policy"], row["first_byte"]


def _paper_key(row: dict) -> tuple:
    return row["kind"], row["run_id"], row["row"], row["column"]


def _crosscheck(inv: inventory.Inventory, rows: list[dict]) -> tuple[int, list[Failure]]:
    try:
        stated = sampled_holes.read_rows(paths.table("crosscheck", root=inv.results))
    except UserError as exc:
        return 1, [_fail(paths.table("crosscheck", root=""), str(exc))]
    repeats = stages.by_series(_of_kind(inv, paths.REPEATS), "regions")
    traces = {row["trace"] for row in rows}
    computes = {
        t: stages.read_output(paths.baseline(t, inv.results))["model_compute"] for t in traces
    }
    points = stages.crosscheck_points(
        rows,
        repeats,
        simrd.policies(inv.rendered),
        computes,
        published.simrd_points(published.load()),
    )
    derived = simrd.table_rows([_checked(p, stated) for p in points])
    text = simrd.markdown(derived, None)
    return _table(inv, "crosscheck", derived, text, _point_key, skip_lines=1)


def _checked(point: dict, stated: list[dict]) -> dict:
    """A cross-check point with simrd's answer as the table states it, and the status that
    answer gives (simrd's eviction sequence is not in the table: DISAGREES may stand)."""
    row = next((r for r in stated if _point_key(r) == _point_key(point)), None)
    if row is None or row["simrd_outcome"] is None:
        return {**point, "status": "not run", "simrd": None}
    simrd = {k: row[f"simrd_{k}"] for k in ("outcome", "clock", "evictions", "overhead", "wall_s")}
    if simrd["outcome"] == TIMEOUT:
        return {**point, "status": TIMEOUT, "simrd": simrd}
    same = all(simrd[k] == point["ours"][k] for k in ("outcome", "clock", "evictions"))
    status = "agrees" if same and row["status"] != "DISAGREES" else "DISAGREES"
    return {**point, "status": status, "simrd": simrd}


def _series_key(row: dict) -> tuple:
    return row["trace"], row["policy"]


def _point_key(row: dict) -> tuple:
    return row["trace"], row["policy"], row["budget"]


def _table(
    inv: inventory.Inventory,
    name: str,
    derived: list[dict],
    text: str,
    key: Callable[[dict], tuple],
    skip_lines: int = 0,
) -> tuple[int, list[Failure]]:
    """A stated table (Parquet and Markdown) against the one derived from the records."""
    count, failures = _rows(inv, name, derived, key)
    return count, failures + _markdown(inv, name, text, skip_lines)


def _rows(
    inv: inventory.Inventory, name: str, derived: list[dict], key: Callable[[dict], tuple]
) -> tuple[int, list[Failure]]:
    """A stated Parquet table's rows against those derived from the records."""
    try:
        stated = sampled_holes.read_rows(paths.table(name, root=inv.results))
    except UserError as exc:
        return 1, [_fail(paths.table(name, root=""), f"unreadable ({exc})")]
    return len(stated), _compare_rows(paths.table(name, root=""), stated, derived, key)


def _markdown(inv: inventory.Inventory, name: str, text: str, skip_lines: int) -> list[Failure]:
    """A stated Markdown table against the text derived from the records, but for its first
    `skip_lines` lines."""
    try:
        markdown = paths.table(name, "md", inv.results).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [_fail(paths.table(name, "md", ""), f"unreadable ({exc})")]
    lines = list(zip(markdown.splitlines(), text.splitlines(), strict=False))[skip_lines:]
    bad = next((i for i, (a, b) in enumerate(lines, skip_lines + 1) if a != b), None)
    if bad is None and len(markdown.splitlines()) == len(text.splitlines()):
        return []
    where = paths.table(name, "md", "") + (f" line {bad}" if bad else "")
    return [_fail(where, "differs from the table the records give")]


def _compare_rows(
    name: str, stated: list[dict], derived: list[dict], key, where=None
) -> list[Failure]:
    """Stated rows against derived ones, matched by `key`; `where` names a row's key."""
    where = where or (lambda k: f"{name} row {' × '.join(str(x) for x in k)}")
    mine = {key(r): r for r in derived}
    theirs = {key(r): r for r in stated}
    failures = []
    for k in sorted(set(mine) | set(theirs), key=str):
        if k not in mine:
            problem = "a row no current record gives"
        elif k not in theirs:
            problem = "missing a row the current records give"
        else:
            problem = diff(theirs[k], mine[k])
        if problem:
            failures.append(_fail(where(k), problem))
    if len(stated) != len(theirs):
        failures.append(_fail(name, f"{len(stated) - len(theirs)} duplicate rows"))
    return failures


def diff(stated: object, derived: object, said: str = "the table states") -> str | None:
    """Where two JSON-like values first differ, as a phrase, or None."""
    found = difference(stated, derived)
    if found is None:
        return None
    path, a, b = found
    return f"{path}: {said} {short(a)}, the records give {short(b)}"


def difference(stated: object, derived: object, path: str = "") -> tuple | None:
    """The first place where two JSON-like values differ: its path and both values."""
    if isinstance(stated, dict) and isinstance(derived, dict):
        for key in sorted(set(stated) | set(derived), key=str):
            found = difference(stated.get(key), derived.get(key), f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(stated, list) and isinstance(derived, list) and len(stated) == len(derived):
        for i, (a, b) in enumerate(zip(stated, derived, strict=True)):
            found = difference(a, b, f"{path}/{i}")
            if found:
                return found
        return None
    if stated == derived and type(stated) is type(derived) or _same_number(stated, derived):
        return None
    return path or "/", stated, derived


def _same_number(a: object, b: object) -> bool:
    numbers = (int, float)
    plain = not isinstance(a, bool) and not isinstance(b, bool)
    return plain and isinstance(a, numbers) and isinstance(b, numbers) and a == b


def short(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
