"""The comparison as people read it (Markdown) and as one Parquet table."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa

from dtrholes.report.paper.comparison import CellVerdict, Paper, PointVerdict
from dtrholes.report.paper.published import study_names


def _dash(text: str) -> str:
    return text or "–"


def final_text(cells: Mapping[str, str]) -> str:
    """A final-table row as the study writes it: samples · first ok · failed OOM/thrashed ·
    regions · stable-from · timeouts (>= stable-from) · geo (n; worst) · H1 H2 H3 · lists."""
    c = {k: _dash(v) for k, v in cells.items()}
    parts = [
        c["samples"],
        c["first_ok"],
        f"{c['failed_oom']}/{c['failed_thrashed']}",
        c["regions"],
        c["stable_from"],
        f"{c['timeouts']} ({c['timeouts_at_or_above_stable']})",
        f"{c['geo']} ({c['geo_n']}; {c['geo_worst']}x)" if cells["geo"] else "–",
        f"{c['h1']} {c['h2']} {c['h3']}" if any(cells[h] for h in ("h1", "h2", "h3")) else "–",
    ]
    lists = {
        "failed_at": "failed at",
        "timeouts_at": "TO at",
        "timeouts_at_or_above_stable_at": "TO >= stable at",
        "thrashed_below_at": f"thrashed below first ok {c['thrashed_below']}x at",
    }
    parts += [f"{name} {cells[k]}" for k, name in lists.items() if cells[k]]
    return " · ".join(parts)


def region_text(cells: Mapping[str, str]) -> str:
    if not any(cells.values()):
        return "–"
    if cells["status"] == "no such region":
        return "no such region"
    fails = f"{cells['first_fail']}…{cells['last_fail']} fail"
    points = cells["confirmed_points"].replace(";", ", ") or "–"
    return (
        f"{cells['ok_below']} ok · {fails} · {cells['ok_above']} ok · points {points} · "
        f"{cells['status']}"
    )


def _rows(paper: Paper, table: str) -> dict[str, list[CellVerdict]]:
    rows: dict[str, list[CellVerdict]] = defaultdict(list)
    for c in paper.cells:
        if c.table == table:
            rows[c.row].append(c)
    return rows


def _why(cells: Sequence[CellVerdict]) -> str:
    """The explanations of a row's differing cells, each once with the columns it explains."""
    columns: dict[str, list[str]] = defaultdict(list)
    for c in cells:
        if c.verdict == "differs":
            columns[c.why].append(c.column)
    return "<br>".join(f"{', '.join(names)}: {why}" for why, names in columns.items()) or "equal"


def _cell_lines(paper: Paper, table: str, text: Callable[[Mapping[str, str]], str]) -> list[str]:
    lines = []
    for label, cells in _rows(paper, table).items():
        published = text({c.column: c.published for c in cells})
        ours = text({c.column: c.ours for c in cells})
        lines.append(f"| {label} | {published} | {ours} | {_why(cells)} |")
    return lines


def _summary_lines(paper: Paper) -> list[str]:
    verdicts = ("agree", "resolved", "differs", "missing", "not compared")
    counts: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    for p in paper.points:
        counts[p.stage, p.trace, p.policy][p.verdict] += 1
    for s in paper.extra:
        counts[s.stage, s.trace, s.policy]["extra"] += 1
    lines = []
    for (stage, trace, policy), n in sorted(counts.items(), key=_summary_order):
        numbers = " | ".join(str(n[v]) for v in (*verdicts, "extra"))
        lines.append(f"| {stage} | {trace} | {policy} | {numbers} |")
    return lines


def _summary_order(item: tuple[tuple[str, str, str], Counter]) -> tuple[int, str, str]:
    stage, trace, policy = item[0]
    compared = study_names().compared
    return (compared.index(stage) if stage in compared else len(compared), trace, policy)


def _point_lines(paper: Paper) -> list[str]:
    return [
        f"| {p.run_id} | {p.stage} | {p.trace} | {p.policy} | {p.ratio} | {p.repeat} "
        f"| {p.published} | {_dash(p.ours)} | {p.verdict} | {p.detail} |"
        for p in paper.points
        if p.verdict != "agree"
    ]


def render_markdown(paper: Paper) -> str:
    """The comparison for people: the verdict first, then both tables side by side, a summary
    of the points per stage x trace x policy, and every point that does not simply agree."""
    lines = [
        paper.verdict,
        "",
        "## Final per trace x policy table",
        "",
        "Cells: samples · first ok · failed above first ok (OOM/thrashed) · regions · "
        "stable-from · timeouts (>= stable-from) · geo vs DTR (n; worst) · H1 H2 H3; "
        "– where the study gives no value.",
        "",
        "| row | published | ours | why |",
        "|---|---|---|---|",
        *_cell_lines(paper, "final", final_text),
        "",
        "## Table 1: DTR failure regions",
        "",
        "| region | published | ours | why |",
        "|---|---|---|---|",
        *_cell_lines(paper, "table1", region_text),
        "",
        "## Points per stage x trace x policy",
        "",
        "| stage | trace | policy | agree | resolved | differs | missing | not compared | extra |",
        "|---|---|---|---|---|---|---|---|---|",
        *_summary_lines(paper),
        "",
        "## Points that do not simply agree",
        "",
        "| run | stage | trace | policy | ratio | repeat | published | ours | verdict | detail |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *_point_lines(paper),
    ]
    return "\n".join(lines) + "\n"


SCHEMA = pa.schema(
    [
        ("kind", pa.string()),  # point, final or table1
        ("stage", pa.string()),
        ("trace", pa.string()),
        ("policy", pa.string()),
        ("row", pa.string()),  # a cell's table row
        ("column", pa.string()),
        ("ratio", pa.string()),  # a point's, as the study wrote it
        ("budget", pa.int64()),
        ("repeat", pa.int64()),
        ("run_id", pa.string()),
        ("ours_run_id", pa.string()),
        ("published", pa.string()),
        ("ours", pa.string()),
        ("verdict", pa.string()),
        ("why", pa.string()),
    ]
)


def _point_row(p: PointVerdict) -> dict:
    return {
        "kind": "point",
        **{k: getattr(p, k) for k in ("stage", "trace", "policy", "ratio", "budget", "repeat")},
        **{k: getattr(p, k) for k in ("run_id", "ours_run_id", "published", "ours", "verdict")},
        "why": p.detail,
    }


def _cell_row(c: CellVerdict) -> dict:
    names = ("trace", "policy", "row", "column", "published", "ours", "verdict", "why")
    return {"kind": c.table, **{k: getattr(c, k) for k in names}}


def table(paper: Paper) -> pa.Table:
    """The comparison as one table: a row per compared point and per published cell."""
    rows = [_point_row(p) for p in paper.points] + [_cell_row(c) for c in paper.cells]
    return pa.Table.from_pylist(rows, schema=SCHEMA)
