"""The comparison: every valid point of the study beside our runs, every published cell beside
the same cell computed from ours, each difference explained, and the verdict."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dtrholes.core import samples
from dtrholes.core.samples import Key, Sample
from dtrholes.report.hypotheses import REFERENCE
from dtrholes.report.paper.published import (
    Published,
    PublishedRun,
    restrict,
    study_names,
    study_samples,
)
from dtrholes.report.paper.rules import (
    CellKey,
    Scope,
    computed_cells,
    final_cells,
    final_scopes,
    scope_of,
    table1_cells,
    table1_scopes,
)
from simulator.result import OK, OOM, THRASHED, TIMEOUT


def our_samples(ours: Iterable[Mapping] | object) -> list[Sample]:
    """Our runs in the compared stages (a list of records-table rows or a DataFrame); at one key
    a resolved run sorts after a timeout, so the rules read the resolved one."""
    rows = ours.to_dict("records") if hasattr(ours, "to_dict") else ours
    compared = study_names().compared
    mine = [samples.from_row(r) for r in rows if r["stage"] in compared]
    return sorted(mine, key=lambda s: (s.key, s.resolved, s.run_id))


def _by_key(samples: Iterable[Sample]) -> dict[Key, list[Sample]]:
    at: dict[Key, list[Sample]] = defaultdict(list)
    for s in samples:
        at[s.key].append(s)
    return at


@dataclass(frozen=True)
class PointVerdict:
    """One valid run of the study beside ours at the same stage, trace, policy, budget, repeat."""

    run_id: str
    stage: str  # ours
    trace: str
    policy: str
    ratio: str  # the study's text
    budget: int
    repeat: int
    published: str
    ours: str
    ours_run_id: str
    verdict: str  # agree, resolved, differs, missing, not compared
    detail: str


def _judge(point: PublishedRun, mine: Sequence[Sample]) -> tuple[str, str]:
    """The verdict on one point: ok outcomes agree only with a bit-identical overhead."""
    resolved = [s for s in mine if s.resolved]
    if not mine:
        return "missing", "no run of ours"
    if len({s.text for s in resolved}) > 1:
        return "differs", "our runs disagree: " + ", ".join(sorted({s.text for s in resolved}))
    if point.status == TIMEOUT:
        if not resolved:
            return "agree", "both timed out"
        return "resolved", f"to {resolved[0].outcome}"
    if not resolved:
        return "differs", "ours timed out"
    s = resolved[0]
    if s.outcome != point.status:
        return "differs", f"{point.status} in the study, {s.outcome} here"
    if s.outcome == OK and s.overhead != float(point.overhead):
        return "differs", f"overhead {point.overhead} in the study, {s.overhead!r} here"
    return "agree", ""


def _point_verdict(point: PublishedRun, mine: Sequence[Sample] | None) -> PointVerdict:
    if mine is None:
        verdict, detail = "not compared", "no simrd source"
    else:
        verdict, detail = _judge(point, mine)
    shown = [s for s in mine or () if s.resolved] or list(mine or ())
    return PointVerdict(
        run_id=point.run_id,
        stage=study_names().stages[point.stage],
        trace=point.trace,
        policy=point.policy,
        ratio=point.ratio,
        budget=point.budget,
        repeat=point.repeat,
        published=point.text,
        ours=shown[-1].text if shown else "",
        ours_run_id=shown[-1].run_id if shown else "",
        verdict=verdict,
        detail=detail,
    )


def _simrd_samples(simrd: Mapping[Key, Mapping]) -> dict[Key, list[Sample]]:
    """simrd's results keyed like the points; a row needs only status, outcome and overhead."""
    at = {}
    for key, row in simrd.items():
        stage, trace, policy, budget, repeat = key
        full = {"ratio": math.nan, **row, "stage": stage, "trace": trace, "policy": policy}
        at[key] = [samples.from_row({**full, "budget": budget, "repeat": repeat})]
    return at


@dataclass(frozen=True)
class CellVerdict:
    """One cell of a published table beside the same cell computed from our runs."""

    table: str  # final or table1
    row: str
    trace: str
    policy: str
    column: str
    published: str
    ours: str
    verdict: str  # equal, differs, not published
    why: str  # for a differing cell: its explanation, or ERROR


@dataclass(frozen=True)
class Reasons:
    """What explains a differing cell: the study's timeouts our runs resolved, and our runs at
    points where the study has no valid run (with the reason it excluded a run there)."""

    resolved: tuple[tuple[Sample, Sample], ...]  # (the study's timeout, our resolved run)
    extra: tuple[Sample, ...]
    excluded: Mapping[Key, str]


def _reasons(study: Sequence[Sample], at: Mapping[Key, list[Sample]], pub: Published) -> Reasons:
    study_keys = {s.key for s in study}
    resolved = []
    for s in study:
        mine = [m for m in at.get(s.key, []) if m.resolved]
        if not s.resolved and mine:
            resolved.append((s, mine[-1]))
    extra = [m for key, runs in sorted(at.items()) if key not in study_keys for m in runs[-1:]]
    excluded = {p.sample.key: p.excluded for p in pub.points if not p.valid}
    return Reasons(tuple(resolved), tuple(extra), excluded)


def _replaced(study: Sequence[Sample], reasons: Reasons) -> list[Sample]:
    """The study's runs with each timeout our runs resolved replaced by ours."""
    ours = {s.run_id: mine for s, mine in reasons.resolved}
    return [ours.get(s.run_id, s) for s in study]


def _timeouts_text(pairs: Sequence[tuple[Sample, Sample]]) -> str:
    by: dict[tuple[str, str], set[float]] = defaultdict(set)
    for study, mine in pairs:
        by[study.policy, mine.outcome].add(study.ratio)
    parts = [f"{p} {o} at {', '.join(map(str, sorted(r)))}" for (p, o), r in sorted(by.items())]
    return "; ".join(parts) or "none"


def _extra_text(extra: Sequence[Sample], excluded: Mapping[Key, str]) -> str:
    def one(s: Sample) -> str:
        why = f" (the study's run was excluded: {excluded[s.key]})" if s.key in excluded else ""
        return f"{s.policy} {s.stage} {s.ratio} r{s.repeat} {s.outcome}{why}"

    return "; ".join(one(s) for s in sorted(extra, key=lambda s: (s.policy, s.ratio, s.key)))


@dataclass(frozen=True)
class Recomputed:
    """The tables the explanations read: published, by the rules from the study's runs, with
    its timeouts replaced by our outcomes, plus our extra runs, and from our runs alone."""

    published: dict[CellKey, str]
    study: dict[CellKey, str]
    replaced: dict[CellKey, str]
    extended: dict[CellKey, str]
    ours: dict[CellKey, str]


def why_differs(key: CellKey, scope: Scope, tabs: Recomputed, reasons: Reasons) -> str:
    """Why a cell of ours differs from the published one; ERROR when nothing explains it."""
    published, ours = tabs.published.get(key, ""), tabs.ours.get(key, "")
    study = tabs.study.get(key, "")
    if published and study != published:
        return f"ERROR: the study's rules give {study or '–'} from its own runs"
    pairs = [(s, m) for s, m in reasons.resolved if scope.holds(s, key[2])]
    timeouts = _timeouts_text(pairs)
    if tabs.replaced.get(key, "") == ours and pairs:
        return f"explained by resolved timeouts: {timeouts}"
    extra = [s for s in reasons.extra if scope.holds(s, key[2])]
    if tabs.extended.get(key, "") == ours and extra:
        return (
            f"explained by resolved timeouts and the extra points ours ran: timeouts {timeouts}; "
            f"extra {_extra_text(extra, reasons.excluded)}"
        )
    return f"ERROR: unexplained (resolved timeouts: {timeouts}; extra points: {len(extra)})"


def _cell_verdict(key: CellKey, scope: Scope, tabs: Recomputed, reasons: Reasons) -> CellVerdict:
    published, ours = tabs.published.get(key), tabs.ours.get(key, "")
    if published == "":  # the study gives no value here (a baseline line, DTR's own geo)
        verdict, why = "not published", ""
    elif published == ours:
        verdict, why = "equal", ""
    else:  # includes a region only ours has (no published cell at all)
        verdict, why = "differs", why_differs(key, scope, tabs, reasons)
    return CellVerdict(
        key[0], key[1], scope.trace, scope.policy, key[2], published or "", ours, verdict, why
    )


@dataclass(frozen=True)
class Paper:
    """The comparison: every valid point of the study and every published cell beside ours."""

    points: tuple[PointVerdict, ...]
    cells: tuple[CellVerdict, ...]
    extra: tuple[Sample, ...]  # our runs in the compared stages at points the study has none
    excluded: int  # the study's runs it excluded itself: counted, not compared
    verdict: str
    ok: bool


def _recomputed(
    study: Sequence[Sample], mine: Sequence[Sample], reasons: Reasons, published: Published
) -> Recomputed:
    replaced = _replaced(study, reasons)
    return Recomputed(
        published={
            **final_cells(published.final),
            **table1_cells(published.table1, published.table1),
        },
        study=computed_cells(study, published),
        replaced=computed_cells(replaced, published),
        extended=computed_cells(replaced + list(reasons.extra), published),
        ours=computed_cells(mine, published),
    )


def _cells(tabs: Recomputed, reasons: Reasons, published: Published) -> tuple[CellVerdict, ...]:
    scopes = {**final_scopes(published.final), **table1_scopes(published.table1)}
    keys = dict.fromkeys([*tabs.ours, *tabs.published])
    return tuple(_cell_verdict(k, scope_of(scopes, k[0], k[1]), tabs, reasons) for k in keys)


def compare(
    ours: Iterable[Mapping] | object,
    published: Published,
    simrd: Mapping[Key, Mapping] | None = None,
) -> Paper:
    """Our runs (records-table rows or a DataFrame) beside the study's: every valid point by
    (stage, trace, policy, budget, repeat), every cell of its final table and Table 1 computed
    by its rules from our runs, and each differing cell explained. `simrd`: unmodified simrd's
    results keyed like the points, for the study's simrd runs (otherwise not compared)."""
    mine = our_samples(ours)
    at = _by_key(mine)
    simrd_at = _simrd_samples(simrd) if simrd is not None else None
    points = tuple(_point_verdict(p, _ours_at(p, at, simrd_at)) for p in published.valid)
    study = study_samples(published)
    reasons = _reasons(study, at, published)
    cells = _cells(_recomputed(study, mine, reasons, published), reasons, published)
    excluded = len(published.points) - len(published.valid)
    line, ok = verdict_line(points, cells, excluded)
    return Paper(points, cells, reasons.extra, excluded, line, ok)


def reproduce(
    rows: Sequence[Mapping], published: Published, checked: Iterable[Mapping] = ()
) -> Paper:
    """Records-table rows beside the study's results, within what they ran: the study's runs
    of the series they hold (a partial run, or another protocol's, is compared with those
    only; a point missing from a series that ran is reported). `checked`: the cross-check
    table's rows, whose simrd answers are compared with the study's simrd runs."""
    series = {(r["stage"], r["trace"], r["policy"]) for r in rows}
    scope = restrict(published, series)
    return compare(rows, scope, simrd_runs(scope, checked))


def simrd_runs(published: Published, checked: Iterable[Mapping]) -> dict[Key, Mapping] | None:
    """Unmodified simrd's answers at the study's simrd points, from cross-check rows (simrd
    replaying DTR's run at the same budget); None when it answered at none of them (no
    source configured), so that they stay not compared."""
    answered = {
        (r["trace"], r["budget"]): r
        for r in checked
        if r["policy"] == REFERENCE and r["simrd_outcome"] is not None
    }
    found = {}
    for point in published.valid:
        row = answered.get((point.trace, point.budget))
        if point.policy == study_names().simrd_policy and row is not None:
            found[point.sample.key] = {
                "run_id": f"simrd at {point.budget}",
                "status": TIMEOUT if row["simrd_outcome"] == TIMEOUT else samples.COMPLETE,
                "outcome": row["simrd_outcome"],
                "overhead": row["simrd_overhead"],
            }
    return found or None


def _ours_at(
    point: PublishedRun, at: Mapping[Key, list[Sample]], simrd_at: Mapping[Key, list[Sample]] | None
) -> list[Sample] | None:
    """Our runs at a point; None for a simrd point without a simrd source."""
    if point.policy != study_names().simrd_policy:
        return at.get(point.sample.key, [])
    return None if simrd_at is None else simrd_at.get(point.sample.key, [])


def _table_tail(cells: Sequence[CellVerdict]) -> str:
    differing = [c for c in cells if c.verdict == "differs"]
    errors = sum(c.why.startswith("ERROR") for c in differing)
    if errors:
        return f", {errors} differing cells UNEXPLAINED (ERROR)"
    if any("extra points" in c.why for c in differing):
        return ", the rest differ only through resolved timeouts and the extra points ours ran"
    return ", the rest differ only through resolved timeouts" if differing else ""


def _rows_equal(cells: Sequence[CellVerdict], labels: Iterable[str]) -> int:
    differing = {c.row for c in cells if c.verdict == "differs"}
    return sum(label not in differing for label in labels)


def _points_text(points: Sequence[PointVerdict]) -> tuple[str, bool]:
    compared = [p for p in points if p.verdict != "not compared"]
    settled = [p for p in compared if p.published != TIMEOUT]
    timeouts = [p for p in compared if p.published == TIMEOUT]
    to = Counter(_outcome_of(p.ours) for p in timeouts if p.verdict == "resolved")
    counts = ", ".join(f"{to[o]:,} {o}" for o in sorted(to, key=_outcome_rank))
    agree = sum(p.verdict == "agree" for p in settled)
    text = f"{agree:,} of {len(settled):,} resolved outcomes agree; "
    text += f"{to.total():,} of {len(timeouts):,} timeouts resolved ({counts or 'none'})"
    bad = Counter(p.verdict for p in compared if p.verdict in ("differs", "missing"))
    if bad["differs"]:
        text += f"; {bad['differs']:,} points DIFFER"
    if bad["missing"]:
        text += f"; {bad['missing']:,} points MISSING"
    return text, not bad


def _outcome_of(text: str) -> str:
    """The outcome of a point's text (`ok <overhead>`, `oom`, ...)."""
    return text.split(" ")[0]


def _outcome_rank(outcome: str) -> tuple[int, str]:
    order = (OK, OOM, THRASHED)
    return (order.index(outcome) if outcome in order else len(order), outcome)


def verdict_line(
    points: Sequence[PointVerdict], cells: Sequence[CellVerdict], excluded: int
) -> tuple[str, bool]:
    """The one-line verdict, and whether it is ok: no point differs or is missing and every
    differing cell is explained."""
    text, points_ok = _points_text(points)
    final = [c for c in cells if c.table == "final"]
    regions = [c for c in cells if c.table == "table1"]
    published_regions = list(dict.fromkeys(c.row for c in regions if c.published))
    only_ours = {c.row for c in regions if not c.published}
    text += f"; Table 1: {_rows_equal(regions, published_regions)} of {len(published_regions)} "
    text += "regions reproduced" + f" (+{len(only_ours)} only in ours)" * bool(only_ours)
    text += _table_tail(regions)
    rows = list(dict.fromkeys(c.row for c in final))
    text += f"; final table: {_rows_equal(final, rows)} of {len(rows)} rows equal"
    text += _table_tail(final)
    unexplained = any(c.why.startswith("ERROR") for c in cells)
    skipped = sum(p.verdict == "not compared" for p in points)
    text += f"; {skipped} simrd points not compared (no simrd source)" * bool(skipped)
    text += f"; {excluded:,} runs the study excluded not compared"
    ok = points_ok and not unexplained
    return text + (" — OK" if ok else " — NOT OK"), ok
