"""The study's rules: its series, final table and Table 1 computed from samples, and the cells
of both tables as the comparison reads them."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from dtrholes.core.samples import Sample
from dtrholes.report.hypotheses import H2_LIMIT, REFERENCE, geomean
from dtrholes.report.paper.published import (
    FINAL_KINDS,
    RATIO,
    TABLE1_COLUMNS,
    FinalRow,
    Published,
    Region,
    render,
    span,
    study_names,
)
from simulator.result import OK, OOM, THRASHED, TIMEOUT

MIXED = "mixed"  # a ratio whose resolved repeats disagree (counted as failing)


def _index(samples: Iterable[Sample]) -> dict[tuple[str, str], list[Sample]]:
    by_series: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s in samples:
        by_series[s.trace, s.policy].append(s)
    return by_series


def series(samples: Iterable[Sample], stages: Sequence[str]) -> list[Sample]:
    """The study's series of one trace x policy: repeat 0 of `stages`, one sample per ratio, a
    later stage in `stages` (then a later sample) replacing an earlier one; sorted by ratio."""
    order = {stage: i for i, stage in enumerate(stages)}
    chosen: dict[float, Sample] = {}
    runs = [s for s in samples if s.stage in order and s.repeat == 0]
    for s in sorted(runs, key=lambda s: order[s.stage]):  # stable: file order within a stage
        chosen[s.ratio] = s
    return [chosen[r] for r in sorted(chosen)]


def first_ok(resolved: Sequence[Sample]) -> float | None:
    """The lowest completing resolved sample."""
    return next((s.ratio for s in resolved if s.outcome == OK), None)


def stable_from(resolved: Sequence[Sample]) -> float | None:
    """The lowest resolved sample from which every higher resolved sample completes."""
    stable = None
    for s in reversed(resolved):
        if s.outcome != OK:
            break
        stable = s.ratio
    return stable


def fail_runs(resolved: Sequence[Sample]) -> list[tuple[Sample, list[Sample], Sample | None]]:
    """Maximal runs of failing resolved samples entered from a success (so above the first ok),
    each with the success below it and the one above it (None at the top)."""
    found, below, run = [], None, []
    for s in resolved:
        if s.outcome == OK:
            if run:
                found.append((below, run, s))
            below, run = s, []
        elif below is not None:
            run.append(s)
    if run:
        found.append((below, run, None))
    return found


@dataclass(frozen=True)
class Shape:
    """What the final table reads off one series."""

    samples: int
    first_ok: float | None
    failing: tuple[Sample, ...]  # resolved non-ok samples above the first ok
    regions: int
    stable_from: float | None
    timeouts: tuple[float, ...]


def shape(samples: Sequence[Sample]) -> Shape:
    """A series' shape, timeouts set aside (they split no region) and counted."""
    resolved = [s for s in samples if s.resolved]
    first = first_ok(resolved)
    above = [s for s in resolved if first is not None and s.ratio > first]
    failing = tuple(s for s in above if s.outcome != OK)
    return Shape(
        samples=len(samples),
        first_ok=first,
        failing=failing,
        regions=len(fail_runs(resolved)),
        stable_from=stable_from(resolved),
        timeouts=tuple(s.ratio for s in samples if not s.resolved),
    )


def geo(samples: Sequence[Sample], dtr: Sequence[Sample]) -> tuple[float, int, float] | None:
    """Geometric mean of policy / DTR overhead over the ratios where both complete, with their
    number and the worst ratio."""
    theirs = {s.ratio: s.overhead for s in dtr if s.outcome == OK}
    both = [s for s in samples if s.outcome == OK and s.ratio in theirs]
    return geomean([s.overhead / theirs[s.ratio] for s in both])


def _verdict(holds: bool) -> str:
    return "pass" if holds else "fail"


def _as_failures(samples: Sequence[Sample]) -> list[Sample]:
    return [s if s.resolved else replace(s, outcome=THRASHED) for s in samples]


def h3(samples: Sequence[Sample], dtr: Sequence[Sample]) -> str | None:
    """Stable-from no higher than DTR's; unresolved where counting every timeout (of both
    series) as a failure flips it, as the protocol's claim rule says. The study's table has no
    unresolved H3, and its cells agree with this rule and with flipping the policy's alone."""
    plain = [stable_from([s for s in x if s.resolved]) for x in (samples, dtr)]
    strict = [stable_from(_as_failures(x)) for x in (samples, dtr)]
    if None in plain:
        return None
    if None in strict or (strict[0] <= strict[1]) != (plain[0] <= plain[1]):
        return "unresolved"
    return _verdict(plain[0] <= plain[1])


def versus_dtr(own: Sequence[Sample], dtr: Sequence[Sample]) -> dict:
    """A policy's cells against DTR's series on the same trace: geo (n; worst), H1, H2, H3."""
    means = geo(own, dtr)
    failed, dtr_failed = (len(shape(x).failing) for x in (own, dtr))
    return {
        "geo": means[0] if means else None,
        "geo_n": means[1] if means else None,
        "geo_worst": means[2] if means else None,
        "h1": _verdict(failed <= dtr_failed),
        "h2": _verdict(means[0] <= H2_LIMIT) if means else None,
        "h3": h3(own, dtr),
    }


def final_row(
    group: str, trace: str, policy: str, runs: Sequence[Sample], dtr_runs: Sequence[Sample]
) -> FinalRow:
    """One row of the final table from a trace x policy's runs and DTR's on the same trace."""
    stages, _ = study_names().groups[group]
    own = series(runs, stages)
    mine = shape(own)
    first, stable = mine.first_ok, mine.stable_from
    # the baselines lines count thrashed runs below the first ok with Stage A's repeats
    thrashed = [s.ratio for s in runs if s.stage in stages and s.outcome == THRASHED]
    below = [r for r in thrashed if first is not None and r < first]
    above = [t for t in mine.timeouts if stable is not None and t >= stable]
    against = versus_dtr(own, series(dtr_runs, stages)) if policy != REFERENCE else {}
    return FinalRow(
        group=group,
        trace=trace,
        policy=policy,
        samples=mine.samples,
        first_ok=first,
        failed_oom=sum(s.outcome == OOM for s in mine.failing),
        failed_thrashed=sum(s.outcome == THRASHED for s in mine.failing),
        regions=mine.regions,
        stable_from=stable,
        timeouts=len(mine.timeouts),
        timeouts_at_or_above_stable=len(above),
        **against,
        failed_at=span(s.ratio for s in mine.failing),
        timeouts_at=span(mine.timeouts),
        timeouts_at_or_above_stable_at=span(above),
        thrashed_below=len(below),
        thrashed_below_at=span(below),
    )


def final_table(samples: Iterable[Sample]) -> tuple[FinalRow, ...]:
    """The study's final table: per group, per confirmatory trace, per policy, in its order."""
    by_series, names = _index(samples), study_names()
    return tuple(
        final_row(group, trace, policy, by_series[trace, policy], by_series[trace, REFERENCE])
        for group, (_, policies) in names.groups.items()
        for trace in names.confirmatory
        for policy in policies
    )


def _by_ratio(samples: Iterable[Sample]) -> dict[float, list[Sample]]:
    by_ratio: dict[float, list[Sample]] = defaultdict(list)
    for s in samples:
        by_ratio[s.ratio].append(s)
    return by_ratio


def collapsed(samples: Iterable[Sample]) -> list[Sample]:
    """One sample per ratio from every repeat: the resolved outcome if the resolved runs agree,
    `mixed` (counted as failing) if they do not, a timeout if none resolved."""
    by_ratio = _by_ratio(samples)
    merged = []
    for ratio in sorted(by_ratio):
        runs = by_ratio[ratio]
        outcomes = {s.outcome for s in runs if s.resolved} or {TIMEOUT}
        merged.append(replace(runs[0], outcome=outcomes.pop() if len(outcomes) == 1 else MIXED))
    return merged


def confirmations(samples: Iterable[Sample]) -> dict[float, str]:
    """The confirmed outcome of every ratio run the study's `repeats` times: at least two runs
    resolved, all alike. A timed-out repeat does not void a point (Table 1's footnote (a):
    InceptionV4 0.2423, two OOM and a timeout, confirmed under the Stage E rule), a lost one
    does (footnote (b): Unrolled GAN 0.237, two OOM and an interrupted run, not confirmed)."""
    confirmed, repeats = {}, study_names().repeats
    for ratio, runs in _by_ratio(samples).items():
        outcomes = [s.outcome for s in runs if s.resolved]
        if len(runs) >= repeats and len(outcomes) >= 2 and len(set(outcomes)) == 1:
            confirmed[ratio] = outcomes[0]
    return confirmed


def _confirmed_region(
    trace: str,
    run: tuple[Sample, list[Sample], Sample | None],
    confirmed: Mapping[float, str],
    bounds: tuple[float, float],
) -> Region:
    """A region with its confirmation: the confirmed failing points inside it and the nearest
    confirmed completing points around them, short of the neighbouring regions (`bounds`)."""
    below, fails, above = run
    first, last = fails[0].ratio, fails[-1].ratio
    failing = sorted(r for r, o in confirmed.items() if first <= r <= last and o != OK)
    low, high = (failing[0], failing[-1]) if failing else (first, last)
    oks = [r for r, o in confirmed.items() if o == OK]
    ok_below = max((r for r in oks if bounds[0] < r < low), default=None)
    ok_above = min((r for r in oks if high < r < bounds[1]), default=None)
    points = tuple(r for r in (ok_below, *failing, ok_above) if r is not None)
    status = "confirmed" if failing and None not in (ok_below, ok_above) else "not confirmed"
    top = above.ratio if above is not None else None
    return Region(trace, below.ratio, first, last, top, points, status)


def trace_regions(samples: Sequence[Sample], trace: str) -> tuple[Region, ...]:
    """Table 1's rows of one trace from DTR's runs on it."""
    names = study_names()
    dev = trace == names.dev_trace
    stages, confirming = (("DEV",), ("DEV",)) if dev else (names.region_stages, names.confirming)
    merged = collapsed(s for s in samples if s.stage in stages)
    runs = fail_runs([s for s in merged if s.resolved])
    confirmed = confirmations(s for s in samples if s.stage in confirming)
    edges = [-math.inf] + [r[1][-1].ratio for r in runs] + [math.inf]
    firsts = [-math.inf] + [r[1][0].ratio for r in runs] + [math.inf]
    return tuple(
        _confirmed_region(trace, run, confirmed, (edges[i], firsts[i + 2]))
        for i, run in enumerate(runs)
    )


def table1(samples: Iterable[Sample]) -> tuple[Region, ...]:
    """The study's Table 1: DTR's failure regions on ResNet-32 (dev) and the confirmatory
    traces, from Stages A, B, C and the confirmation stages D, E, F."""
    by_series, names = _index(samples), study_names()
    return tuple(
        region
        for trace in (names.dev_trace, *names.confirmatory)
        for region in trace_regions(by_series.get((trace, REFERENCE), []), trace)
    )


# Cells: (table, row label, column) -> canonical text; a scope says which runs feed a row.
CellKey = tuple[str, str, str]
DTR_COLUMNS = ("geo", "geo_n", "geo_worst", "h1", "h2", "h3")  # cells that read DTR's series


@dataclass(frozen=True)
class Scope:
    """The runs a table row reads: a trace, its policies, stages and a ratio range."""

    trace: str
    policy: str
    stages: tuple[str, ...]
    low: float = -math.inf
    high: float = math.inf

    def holds(self, s: Sample, column: str) -> bool:
        policies = (self.policy, REFERENCE) if column in DTR_COLUMNS else (self.policy,)
        inside = self.low < s.ratio < self.high
        return s.trace == self.trace and s.policy in policies and s.stage in self.stages and inside


def final_cells(rows: Iterable[FinalRow]) -> dict[CellKey, str]:
    return {
        ("final", row.label, name): render(kind, getattr(row, name))
        for row in rows
        for name, kind in FINAL_KINDS.items()
    }


def final_scopes(rows: Iterable[FinalRow]) -> dict[tuple[str, str], Scope]:
    groups = study_names().groups
    return {("final", r.label): Scope(r.trace, r.policy, groups[r.group][0]) for r in rows}


def region_label(region: Region) -> str:
    return f"{region.trace} {region.ok_below}…{region.ok_above}"  # no `|`: a Markdown cell


def _region_texts(region: Region | None) -> dict[str, str]:
    if region is None:
        return dict.fromkeys(TABLE1_COLUMNS, "no such region")
    ratios = {c: render(RATIO, getattr(region, c)) for c in TABLE1_COLUMNS[:4]}
    points = ";".join(map(str, region.confirmed_points))
    return {**ratios, "confirmed_points": points, "status": region.status}


def _overlaps(region: Region, published: Region) -> bool:
    below, above = published.ok_below or -math.inf, published.ok_above or math.inf
    same = region.trace == published.trace
    return same and region.first_fail < above and region.last_fail > below


def match_regions(
    published: Sequence[Region], computed: Sequence[Region]
) -> dict[str, Region | None]:
    """Computed regions by the label of the published region they overlap (None: no region
    there); a computed region that overlaps none is labelled `<trace> extra <n>`."""
    matched: dict[str, Region | None] = {}
    left = list(computed)
    for p in published:
        found = next((r for r in left if _overlaps(r, p)), None)
        matched[region_label(p)] = found
        if found is not None:
            left.remove(found)
    extras: Counter = Counter()
    for r in left:
        extras[r.trace] += 1
        matched[f"{r.trace} extra {extras[r.trace]}"] = r
    return matched


def table1_cells(published: Sequence[Region], computed: Sequence[Region]) -> dict[CellKey, str]:
    return {
        ("table1", label, column): text
        for label, region in match_regions(published, computed).items()
        for column, text in _region_texts(region).items()
    }


def table1_scopes(published: Sequence[Region]) -> dict[tuple[str, str], Scope]:
    """Each published region reads DTR's runs between its neighbouring regions."""
    scopes, stages = {}, study_names().table1_stages
    for i, p in enumerate(published):
        before = [r.last_fail for r in published[:i] if r.trace == p.trace]
        after = [r.first_fail for r in published[i + 1 :] if r.trace == p.trace]
        low, high = max(before, default=-math.inf), min(after, default=math.inf)
        scopes["table1", region_label(p)] = Scope(p.trace, REFERENCE, stages, low, high)
    return scopes


def scope_of(scopes: Mapping[tuple[str, str], Scope], table: str, label: str) -> Scope:
    """A row's scope; a region only ours has (`<trace> extra <n>`) reads all of DTR's runs."""
    if (table, label) in scopes:
        return scopes[table, label]
    return Scope(label.split()[0], REFERENCE, study_names().table1_stages)


def computed_cells(samples: Sequence[Sample], published: Published) -> dict[CellKey, str]:
    """Every cell of the final table (its published rows) and of Table 1 computed from
    `samples` by the rules."""
    rows = {r.label for r in published.final}
    final = final_cells(r for r in final_table(samples) if r.label in rows)
    return {**final, **table1_cells(published.table1, table1(samples))}
