"""Feasibility holes in a series of sampled budgets, counted by the study's rules."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dtrholes.core import files, samples
from dtrholes.core.samples import Sample
from dtrholes.holes.feasibility import Hole, SampledSummary
from dtrholes.study import plan
from simulator import UserError
from simulator.result import FAILING, OK, OOM, THRASHED


def collapse(samples: list[Sample]) -> list[Sample]:
    """One sample per budget; repeats that disagree are an error, never averaged."""
    by_budget: dict[int, set[str]] = defaultdict(set)
    ratio: dict[int, float | None] = {}
    for s in samples:
        by_budget[s.budget].add(s.outcome)
        ratio[s.budget] = s.ratio
    disagreeing = {b: sorted(o) for b, o in by_budget.items() if len(o) > 1}
    if disagreeing:
        budget, outcomes = min(disagreeing.items())
        raise UserError(f"budget {budget}", "repeats with one outcome", " and ".join(outcomes))
    return [
        Sample(budget=b, ratio=ratio[b], outcome=next(iter(by_budget[b])))
        for b in sorted(by_budget)
    ]


def _holes(resolved: list[Sample]) -> tuple[Hole, ...]:
    found, run = [], []
    for i, s in enumerate(resolved):
        if s.outcome in FAILING:
            run.append(i)
            continue
        if run and run[0] > 0 and resolved[run[0] - 1].outcome == OK:
            below = resolved[run[0] - 1].budget
            first, last = resolved[run[0]].budget, resolved[run[-1]].budget
            found.append(Hole(first, last, below, s.budget, len(run)))
        run = []
    return tuple(found)


def summarise(samples: list[Sample]) -> SampledSummary:
    """A series' first success, the holes above it (maximal runs of failing samples with a
    completing sample just below and just above) and the study's counts."""
    series = collapse(samples)
    resolved = [s for s in series if s.resolved]  # timeouts split no region
    first = next((s.budget for s in resolved if s.outcome == OK), None)
    above = [s for s in resolved if first is not None and s.budget > first]
    failing = tuple(s.budget for s in above if s.outcome in FAILING)
    stable = None
    for s in reversed(resolved):
        if s.outcome != OK:
            break
        stable = s.budget
    return SampledSummary(
        samples=len(series),
        first_success=first,
        failing_above=failing,
        oom_above=sum(s.outcome == OOM for s in above),
        thrashed_above=sum(s.outcome == THRASHED for s in above),
        holes=_holes(resolved),
        stable_from=stable,
        unresolved=len(series) - len(resolved),
    )


def sample_of(record: dict) -> Sample:
    """A record's sample: its outcome, or `timeout` when the guard stopped it."""
    return Sample(
        budget=record["budget"], ratio=record["ratio"], outcome=samples.record_outcome(record)
    )


def confirmation_points(hole: Hole, series: list[Sample], mode: str) -> list[int]:
    """The budgets that confirm a sampled hole (a region): the completing samples just outside
    it and, inside, its first and last failing sample (`brackets`) or every failing sample
    (`region`)."""
    if mode == "brackets":
        inside = sorted({hole.first, hole.last})
    else:
        inside = [
            s.budget for s in series if hole.first <= s.budget <= hole.last and s.outcome in FAILING
        ]
    return [hole.ok_below, *inside, hole.ok_above]


@dataclass(frozen=True)
class EdgesAndRepeats:
    """What the holes table reads besides the records: per trace × policy, the exact edges and
    the repeats, and the protocol version in effect."""

    edges: dict[tuple[str, str], list[dict]]
    repeats: dict[tuple[str, str], list[dict]]
    protocol_version: str


def tabulate(records_table: Path, derived: EdgesAndRepeats, out: Path, markdown_out: Path) -> int:
    """Summarise every trace × policy series of a records table; returns the row count."""
    table = table_rows(read_rows(records_table), derived)
    files.write_table(pa.Table.from_pylist(table, schema=SCHEMA), out)
    files.write_text(markdown_out, markdown(table, derived.protocol_version))
    return len(table)


def table_rows(rows: list[dict], derived: EdgesAndRepeats) -> list[dict]:
    """The holes table of records-table rows: one row per trace × policy series."""
    by_series: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        by_series[row["trace"], row["policy"]].append(row)
    return [_table_row(key, found, derived) for key, found in sorted(by_series.items())]


def read_rows(records_table: Path) -> list[dict]:
    """The rows of a Parquet table; an unreadable file is a user error naming it."""
    try:
        return pq.read_table(records_table).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise UserError(str(records_table), "a readable Parquet table", str(exc)) from None


def _table_row(key: tuple[str, str], rows: list[dict], derived: EdgesAndRepeats) -> dict:
    sampled = [r for r in rows if plan.is_sample(r["stage"])]
    series = [
        Sample(budget=r["budget"], ratio=r["ratio"], outcome=samples.outcome_of(r)) for r in sampled
    ]
    summary = summarise(series)
    edges = derived.edges.get(key, [])
    repeats = derived.repeats.get(key, [])
    return {
        "trace": key[0],
        "policy": key[1],
        **_flat(summary),
        "exact_edges": json.dumps(edges),
        "edges_unresolved": sum(not e["resolved"] for e in edges),
        "regions_confirmed": sum(r["confirmed"] for r in repeats),
        "repeat_disagreements": sum(len(p["disagree"]) for r in repeats for p in r["points"]),
        **protocol_labels(rows, derived.protocol_version),
    }


def protocol_labels(rows: list[dict], current: str) -> dict:
    """Which protocol versions and amendments a table row's records ran under, and whether
    any of them is older than `current`."""
    versions = sorted({r["protocol_version"] for r in rows if r["protocol_version"]})
    return {
        "protocol_versions": ",".join(versions),
        "older_protocol": any(v != current for v in versions),
        "amendments": ",".join(sorted({a for r in rows for a in r["amendments"]})),
    }


LABEL_FIELDS = [
    ("protocol_versions", pa.string()),
    ("older_protocol", pa.bool_()),
    ("amendments", pa.string()),
]


def _flat(summary: SampledSummary) -> dict:
    return {
        "samples": summary.samples,
        "first_success": summary.first_success,
        "failing_above": len(summary.failing_above),
        "oom_above": summary.oom_above,
        "thrashed_above": summary.thrashed_above,
        "regions": len(summary.holes),
        "region_brackets": json.dumps([h.bracket() for h in summary.holes]),
        "stable_from": summary.stable_from,
        "unresolved": summary.unresolved,
    }


SCHEMA = pa.schema(
    [
        ("trace", pa.string()),
        ("policy", pa.string()),
        ("samples", pa.int64()),
        ("first_success", pa.int64()),
        ("failing_above", pa.int64()),
        ("oom_above", pa.int64()),
        ("thrashed_above", pa.int64()),
        ("regions", pa.int64()),
        ("region_brackets", pa.string()),
        ("stable_from", pa.int64()),
        ("unresolved", pa.int64()),
        ("exact_edges", pa.string()),
        ("edges_unresolved", pa.int64()),
        ("regions_confirmed", pa.int64()),
        ("repeat_disagreements", pa.int64()),
        *LABEL_FIELDS,
    ]
)


def _bracket(r: dict) -> str:
    fails = f"{r['first_fail']:,} … {r['last_fail']:,} fail"
    return f"{r['ok_below']:,} ok; {fails}; {r['ok_above']:,} ok"  # no pipe: a cell separator


def _edge(e: dict) -> str:
    if e["resolved"]:
        return f"{e['below']:,} {e['outcome_below']} / +1 {e['outcome_above']}"
    return f"in ({e['below']:,}, {e['above']:,}] unresolved"


def markdown(table: list[dict], version: str) -> str:
    lines = [
        f"Protocol version {version}; rows marked † hold runs recorded under an older version.",
        "",
        "| trace | policy | samples | first success | failing above (OOM / thrashed) | regions "
        "(confirmed) | edge brackets (bytes) | exact edges (bytes) | stable from | unresolved |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table:
        brackets = "<br>".join(_bracket(r) for r in json.loads(row["region_brackets"])) or "–"
        exact = "<br>".join(_edge(e) for e in json.loads(row["exact_edges"])) or "–"
        mark = " †" if row["older_protocol"] else ""
        lines.append(
            f"| {row['trace']}{mark} | {row['policy']} | {row['samples']} "
            f"| {row['first_success']} "
            f"| {row['failing_above']} ({row['oom_above']} / {row['thrashed_above']}) "
            f"| {row['regions']} ({row['regions_confirmed']}) | {brackets} | {exact} "
            f"| {row['stable_from']} | {row['unresolved']} |"
        )
    return "\n".join([*lines, "", *LEGEND]) + "\n"


LEGEND = (
    "- samples: sampled budgets of the series (every stage; repeats of a budget count once);",
    "- first success: the lowest budget (bytes) that completes;",
    "- failing above: failing samples above the first success, by outcome;",
    "- regions: runs of failing samples with a completing sample just below and just above",
    "  (feasibility holes), and how many of them fresh-process repeats confirmed;",
    "- edge brackets: per region, the completing sample below, its first and last failing",
    "  samples, and the completing sample above;",
    "- exact edges: per feasibility change, the byte at which it happens (`b oom / +1 ok`:",
    "  budget b fails, b + 1 completes), found by bisection on bytes;",
    "- stable from: the lowest budget from which every higher resolved sample completes;",
    "- unresolved: samples that timed out (a timeout splits no region).",
)
