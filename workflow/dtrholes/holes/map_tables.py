"""Tables of exact maps: holes counted and measured, set beside what the sampled stages saw."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from dtrholes.core import files, paths
from dtrholes.core.samples import COMPLETE, Sample
from dtrholes.holes import maps, sampled_holes
from dtrholes.holes.feasibility import ExactSummary, Hole
from dtrholes.holes.maps import Map
from simulator.result import FAILING

LISTED = 200  # holes listed in the Markdown table; the Parquet table has all of them
# The sampled stages, added one at a time: which holes each sampling would have seen.
SAMPLINGS = (
    ("grid", (paths.STAGE_A,)),
    ("stage_c", (paths.STAGE_A, paths.STAGE_C)),
    ("stage_b", (paths.STAGE_A, paths.STAGE_B, paths.STAGE_C)),
)


def sampled(rows: list[dict], trace: str, policy: str) -> dict[str, list[Sample]]:
    """A series' resolved samples per stage, from records-table rows."""
    found: dict[str, list[Sample]] = defaultdict(list)
    for r in rows:
        if (r["trace"], r["policy"]) == (trace, policy) and r["status"] == COMPLETE:
            found[r["stage"]].append(
                Sample(budget=r["budget"], ratio=r["ratio"], outcome=r["outcome"])
            )
    return found


def hole_rows(m: Map, samples: dict[str, list[Sample]]) -> list[dict]:
    """One row per exact hole: edges, width, and for each sampling whether it saw the hole (a
    failing sample inside) and whether it merged it with another into one sampled hole."""
    found = maps.summarise(m).holes
    rows = [_hole(m, h) for h in found]
    for name, stages in SAMPLINGS:
        series = sampled_holes.collapse([s for stage in stages for s in samples.get(stage, [])])
        seen = sampled_holes.summarise(series).holes
        owner = [_enclosing(h, seen) for h in found]
        for row, h, region in zip(rows, found, owner, strict=True):
            row[f"seen_{name}"] = any(
                h.first <= s.budget <= h.last and s.outcome in FAILING for s in series
            )
            row[f"merged_{name}"] = region is not None and owner.count(region) > 1
    return rows


def _hole(m: Map, h: Hole) -> dict:
    return {
        "trace": m.trace,
        "policy": m.policy,
        "first_byte": h.first,
        "last_byte": h.last,
        "first_ratio": h.first / m.peak,
        "last_ratio": h.last / m.peak,
        "width": h.width,
        "exact": h.exact,
    }


def _enclosing(exact: Hole, sampled: tuple[Hole, ...]) -> int | None:
    """The sampled hole whose completing brackets enclose an exact hole, if any."""
    return next((i for i, h in enumerate(sampled) if h.encloses(exact)), None)


def disagreements(m: Map, samples: dict[str, list[Sample]]) -> list[int]:
    """Sampled budgets inside the map whose outcome differs from the map's."""
    return sorted(
        {
            s.budget
            for found in samples.values()
            for s in found
            if maps.outcome_at(m, s.budget) not in (None, maps.UNCOVERED, s.outcome)
        }
    )


def series_row(m: Map, found: list[dict], disagree: list[int]) -> dict:
    """One trace × policy: coverage, holes above the first success, what sampling missed."""
    summary = maps.summarise(m)
    row = {
        "trace": m.trace,
        "policy": m.policy,
        "runs": summary.runs,
        "ranges": json.dumps([[s.first, s.last] for s in m.ranges]),
        "covered_bytes": summary.covered,
        "uncovered_bytes": summary.uncovered,
        "exact": summary.uncovered == 0,
        "first_success": summary.first_success,
        "holes": len(summary.holes),
        "exact_holes": sum(h.exact for h in summary.holes),
        "widest_hole": max((h.width for h in summary.holes), default=None),
        "narrowest_hole": min((h.width for h in summary.holes), default=None),
        "sample_disagreements": len(disagree),
        "verdict": verdict(m, summary),
    }
    for name, _ in SAMPLINGS:
        row[f"missed_by_{name}"] = sum(not h[f"seen_{name}"] for h in found)
        row[f"merged_by_{name}"] = sum(h[f"merged_{name}"] for h in found)
    return row


def verdict(m: Map, summary: ExactSummary) -> str:
    reasons = {t.reason for t in m.tiles if t.reason}
    if not m.ranges:
        return "not mapped: no range planned"
    if summary.covered == 0:
        return "not mapped: " + "; ".join(sorted(reasons))
    coverage = "" if not summary.uncovered else f" ({summary.uncovered:,} bytes uncovered)"
    if summary.monotone:
        return f"monotone on the covered range{coverage}"
    return f"not monotone: {len(summary.holes)} holes{coverage}"


SERIES_SCHEMA = pa.schema(
    [
        ("trace", pa.string()),
        ("policy", pa.string()),
        ("runs", pa.int64()),
        ("ranges", pa.string()),
        ("covered_bytes", pa.int64()),
        ("uncovered_bytes", pa.int64()),
        ("exact", pa.bool_()),
        ("first_success", pa.int64()),
        ("holes", pa.int64()),
        ("exact_holes", pa.int64()),
        ("widest_hole", pa.int64()),
        ("narrowest_hole", pa.int64()),
        ("sample_disagreements", pa.int64()),
        ("verdict", pa.string()),
        *((f"{k}_by_{name}", pa.int64()) for name, _ in SAMPLINGS for k in ("missed", "merged")),
    ]
)
HOLE_SCHEMA = pa.schema(
    [
        *maps.SPAN_FIELDS,
        ("exact", pa.bool_()),
        *((f"{kind}_{name}", pa.bool_()) for name, _ in SAMPLINGS for kind in ("seen", "merged")),
    ]
)


def tabulate(found: list[Map], rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The series table and the holes table of some maps, against records-table rows."""
    series, all_holes = [], []
    for m in sorted(found, key=lambda m: (m.trace, m.policy)):
        samples = sampled(rows, m.trace, m.policy)
        mine = hole_rows(m, samples)
        series.append(series_row(m, mine, disagreements(m, samples)))
        all_holes += mine
    return series, all_holes


def write(series: list[dict], found_holes: list[dict], out: Path, holes_out: Path, md: Path):
    files.write_table(pa.Table.from_pylist(series, schema=SERIES_SCHEMA), out)
    files.write_table(pa.Table.from_pylist(found_holes, schema=HOLE_SCHEMA), holes_out)
    files.write_text(md, markdown(series, found_holes))


def verdicts(series: list[dict]) -> list[str]:
    """One line per trace: each mapped policy's verdict."""
    by_trace: dict[str, list[str]] = defaultdict(list)
    for row in series:
        by_trace[row["trace"]].append(f"{row['policy']} {row['verdict']}")
    return [f"{trace}: " + "; ".join(found) for trace, found in sorted(by_trace.items())]


def markdown(series: list[dict], found_holes: list[dict]) -> str:
    lines = ["# Exact feasibility maps", "", *(f"- {v}" for v in verdicts(series)), ""]
    lines += [
        "| trace | policy | runs | covered (uncovered) bytes | holes (exact) | widths (bytes) "
        "| missed by grid / +C / +B | merged by grid / +C / +B | samples disagreeing |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in series:
        widths = "–"
        if r["widest_hole"] is not None:
            widths = f"{r['narrowest_hole']:,}–{r['widest_hole']:,}"
        missed = " / ".join(str(r[f"missed_by_{n}"]) for n, _ in SAMPLINGS)
        merged = " / ".join(str(r[f"merged_by_{n}"]) for n, _ in SAMPLINGS)
        lines.append(
            f"| {r['trace']} | {r['policy']} | {r['runs']:,} | {r['covered_bytes']:,} "
            f"({r['uncovered_bytes']:,}) | {r['holes']} ({r['exact_holes']}) | {widths} "
            f"| {missed} | {merged} | {r['sample_disagreements']} |"
        )
    lines += ["", "## Holes above the first success", ""]
    lines += [
        "| trace | policy | first byte | last byte | ratios | width | exact "
        "| seen by grid / +C / +B |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for h in found_holes[:LISTED]:
        seen = " / ".join("yes" if h[f"seen_{n}"] else "no" for n, _ in SAMPLINGS)
        lines.append(
            f"| {h['trace']} | {h['policy']} | {h['first_byte']:,} | {h['last_byte']:,} "
            f"| {h['first_ratio']:.6f}–{h['last_ratio']:.6f} | {h['width']:,} "
            f"| {'yes' if h['exact'] else 'no'} | {seen} |"
        )
    if len(found_holes) > LISTED:
        lines += ["", f"{len(found_holes) - LISTED:,} more holes in the Parquet table."]
    return "\n".join(lines) + "\n"
