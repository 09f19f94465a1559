"""The study's published results beside this project's: its rules, its tables, point by point."""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa

from dtrholes.core import paths
from dtrholes.report.hypotheses import H2_LIMIT, REFERENCE, geomean
from simulator import UserError

PUBLISHED = Path(__file__).resolve().parents[3] / "protocol" / "published"

# The study's stage names and the stages of this project that replay them.
STAGES = {
    "A": "A",
    "A-baselines": "A",
    "A-tcontrol": "A",
    "B": "B",
    "C": "C",
    "D": "D",
    "E": "E",
    "F-confirm-20260929": "F",
    "LSTM": "DEV",
    "dev": "DEV",
}
COMPARED = ("A", "B", "C", "D", "E", "F", "DEV")  # stages that hold the study's points
CONFIRMATORY = ("densenet121", "inceptionv4", "transformer", "unet", "treelstm", "unroll_gan")
SIMRD = "simrd"  # unmodified simrd: no records of ours, compared only when a source is given
GROUPS = {  # final table: the stages each group reads, in the order a later one overrides
    "frozen": (paths.SAMPLED, ("dtr", "nbhd-penalty", "two-phase")),
    "baselines": ((paths.STAGE_A,), ("dtr", "he-star", "cost-stale", "tcontrol-inspired")),
}
REGION_STAGES = ("A", "B", "C", "D", "E", "F")  # Table 1: where the regions come from
CONFIRMING = ("D", "E", "F")  # Table 1: where the repeats that confirm them come from
DEV_TRACE = "resnet32"  # Table 1's development row: regions and repeats from the dev sweep
REPEATS = 3  # runs a confirmation point needs (at least two of them resolved, none disagreeing)
FIGURE1 = ("resnet32", "inceptionv4", "unet")  # the traces of the study's Figure 1
FIGURE1_POLICY = "dtr"  # its policy

Key = tuple[str, str, str, int, int]  # our stage, trace, policy, budget, repeat


@dataclass(frozen=True)
class Sample:
    """One run as the rules read it; `outcome` is ok, oom, thrashed, or timeout (unresolved)."""

    stage: str
    trace: str
    policy: str
    ratio: float
    budget: int
    repeat: int
    outcome: str
    overhead: float | None = None
    run_id: str = ""

    @property
    def key(self) -> Key:
        return (self.stage, self.trace, self.policy, self.budget, self.repeat)

    @property
    def resolved(self) -> bool:
        return self.outcome != "timeout"

    @property
    def text(self) -> str:
        return f"ok {self.overhead!r}" if self.outcome == "ok" else self.outcome


# --- the published data ---------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One execution of the study (a row of evidence.csv or dev.csv)."""

    run_id: str
    stage: str  # as the study wrote it
    trace: str
    policy: str  # this project's name
    ratio: str  # verbatim
    budget: int
    repeat: int
    status: str
    overhead: str  # verbatim, empty if none
    peak_pinned: int | None
    depth_at_peak_pinned: int | None
    max_depth: int | None
    valid: bool
    excluded: str

    @property
    def sample(self) -> Sample:
        return Sample(
            stage=STAGES[self.stage],
            trace=self.trace,
            policy=self.policy,
            ratio=float(self.ratio),
            budget=self.budget,
            repeat=self.repeat,
            outcome=self.status,
            overhead=float(self.overhead) if self.overhead else None,
            run_id=self.run_id,
        )

    @property
    def text(self) -> str:
        return f"ok {self.overhead}" if self.status == "ok" else self.status


@dataclass(frozen=True)
class FinalRow:
    """One trace x policy row of the study's final table; None where no value is given."""

    group: str  # frozen (Stages A + C + B) or baselines (Stage A only)
    trace: str
    policy: str
    samples: int | None = None
    first_ok: float | None = None
    failed_oom: int | None = None
    failed_thrashed: int | None = None
    regions: int | None = None
    stable_from: float | None = None
    timeouts: int | None = None
    timeouts_at_or_above_stable: int | None = None
    geo: float | None = None
    geo_n: int | None = None
    geo_worst: float | None = None
    h1: str | None = None
    h2: str | None = None
    h3: str | None = None
    failed_at: str | None = None  # ratio lists as spans (see `span`)
    timeouts_at: str | None = None
    timeouts_at_or_above_stable_at: str | None = None
    thrashed_below: int | None = None  # thrashed runs below first ok, repeats included
    thrashed_below_at: str | None = None

    @property
    def label(self) -> str:
        return f"{self.group} {self.trace} {self.policy}"


@dataclass(frozen=True)
class Region:
    """One row of the study's Table 1: a DTR failure region and the repeats that confirm it."""

    trace: str
    ok_below: float | None
    first_fail: float
    last_fail: float
    ok_above: float | None
    confirmed_points: tuple[float, ...]
    status: str
    note: str = ""


@dataclass(frozen=True)
class Published:
    """Everything the comparison reads of the study."""

    points: tuple[Point, ...]
    final: tuple[FinalRow, ...]
    table1: tuple[Region, ...]

    @property
    def valid(self) -> tuple[Point, ...]:
        return tuple(p for p in self.points if p.valid)


# Cell kinds: how a column is parsed from the CSV and written as canonical text.
RATIO, COUNT, GEO, WORST, TEXT, SPAN = "ratio", "count", "geo", "worst", "text", "span"
FINAL_KINDS = {
    "samples": COUNT,
    "first_ok": RATIO,
    "failed_oom": COUNT,
    "failed_thrashed": COUNT,
    "regions": COUNT,
    "stable_from": RATIO,
    "timeouts": COUNT,
    "timeouts_at_or_above_stable": COUNT,
    "geo": GEO,
    "geo_n": COUNT,
    "geo_worst": WORST,
    "h1": TEXT,
    "h2": TEXT,
    "h3": TEXT,
    "failed_at": SPAN,
    "timeouts_at": SPAN,
    "timeouts_at_or_above_stable_at": SPAN,
    "thrashed_below": COUNT,
    "thrashed_below_at": SPAN,
}
TABLE1_COLUMNS = ("ok_below", "first_fail", "last_fail", "ok_above", "confirmed_points", "status")


def span(ratios: Iterable[float]) -> str | None:
    """A set of ratios as the study lists them: one or two enumerated, more as `lowest-highest`."""
    values = sorted(set(ratios))
    if not values:
        return None
    if len(values) <= 2:
        return ";".join(map(str, values))
    return f"{values[0]}-{values[-1]}"


def _parse(kind: str, text: str) -> object:
    if text == "":
        return None
    if kind == COUNT:
        return int(text)
    if kind in (RATIO, GEO, WORST):
        return float(text)
    if kind == SPAN and "-" in text:
        low, high = text.split("-")
        return f"{float(low)}-{float(high)}"
    if kind == SPAN:
        return span(float(r) for r in text.split(";"))
    return text


def render(kind: str, value: object) -> str:
    """A cell's canonical text: how published and computed cells are compared."""
    if value is None:
        return ""
    if kind == GEO:
        return f"{value:.4f}"
    if kind == WORST:
        return f"{value:.2f}"
    return str(value)


def _csv_rows(path: Path) -> list[tuple[int, dict]]:
    try:
        with path.open(encoding="utf-8", newline="") as f:
            return list(enumerate(csv.DictReader(f), start=2))
    except OSError as exc:
        raise UserError(str(path), "a readable CSV file", str(exc)) from None


def _guarded(path: Path, line: int, build: Callable[[dict], object], row: dict) -> object:
    """A CSV row parsed by `build`; a malformed one is a user error naming its line."""
    try:
        return build(row)
    except (KeyError, ValueError, TypeError) as exc:
        where = f"{path}:{line}"
        raise UserError(where, "a row of the published transcription", repr(exc)) from None


def _read(path: Path, build: Callable[[dict], object]) -> tuple:
    return tuple(_guarded(path, line, build, row) for line, row in _csv_rows(path))


def _int_or_none(text: str) -> int | None:
    return int(text) if text else None


def _point(row: dict) -> Point:
    return Point(
        run_id=row["run_id"],
        stage=row["stage"],
        trace=row["trace"],
        policy=row["policy"],
        ratio=row["ratio"],
        budget=int(row["budget"]),
        repeat=int(row["repeat"]),
        status=row["status"],
        overhead=row["overhead"],
        peak_pinned=_int_or_none(row["peak_pinned"]),
        depth_at_peak_pinned=_int_or_none(row["depth_at_peak_pinned"]),
        max_depth=_int_or_none(row["max_depth"]),
        valid=row["valid"] == "yes",
        excluded=row["excluded"],
    )


def _final_row(row: dict) -> FinalRow:
    values = {name: _parse(kind, row[name]) for name, kind in FINAL_KINDS.items()}
    return FinalRow(row["group"], row["trace"], row["policy"], **values)


def _region(row: dict) -> Region:
    return Region(
        trace=row["trace"],
        ok_below=float(row["ok_below"]),
        first_fail=float(row["first_fail"]),
        last_fail=float(row["last_fail"]),
        ok_above=float(row["ok_above"]),
        confirmed_points=tuple(float(r) for r in row["confirmed_points"].split(";")),
        status=row["status"],
        note=row["note"],
    )


def load(directory: Path = PUBLISHED) -> Published:
    """The study's points (evidence.csv then dev.csv, in file order) and its two tables."""
    directory = Path(directory)
    points = _read(directory / "evidence.csv", _point) + _read(directory / "dev.csv", _point)
    return Published(
        points=points,
        final=_read(directory / "final_table.csv", _final_row),
        table1=_read(directory / "table1.csv", _region),
    )


def restrict(published: Published, series: Iterable[tuple[str, str, str]]) -> Published:
    """What runs of some (stage, trace, policy) series can be compared with: the study's points
    of those series (its simrd runs beside DTR's), the final table's rows whose Stage A series
    and DTR's ran, and Table 1's regions whose stages ran DTR."""
    ran = set(series)

    def point(p: Point) -> bool:
        return (STAGES[p.stage], p.trace, REFERENCE if p.policy == SIMRD else p.policy) in ran

    def row(r: FinalRow) -> bool:
        return {(paths.STAGE_A, r.trace, r.policy), (paths.STAGE_A, r.trace, REFERENCE)} <= ran

    def region(r: Region) -> bool:
        stages = ("DEV",) if r.trace == DEV_TRACE else REGION_STAGES
        return any((stage, r.trace, REFERENCE) in ran for stage in stages)

    return Published(
        points=tuple(filter(point, published.points)),
        final=tuple(filter(row, published.final)),
        table1=tuple(filter(region, published.table1)),
    )


def simrd_points(published: Published) -> list[tuple[str, str, int]]:
    """Where the study ran unmodified simrd, as the runs of DTR it replays: trace, policy and
    budget, each once, in its order."""
    return list(
        dict.fromkeys((p.trace, REFERENCE, p.budget) for p in published.valid if p.policy == SIMRD)
    )


def study_samples(published: Published) -> list[Sample]:
    """The study's valid runs as samples, in its file order (which its rules depend on)."""
    return [p.sample for p in published.valid]


# --- the study's rules -----------------------------------------------------------------------


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
    return next((s.ratio for s in resolved if s.outcome == "ok"), None)


def stable_from(resolved: Sequence[Sample]) -> float | None:
    """The lowest resolved sample from which every higher resolved sample completes."""
    stable = None
    for s in reversed(resolved):
        if s.outcome != "ok":
            break
        stable = s.ratio
    return stable


def fail_runs(resolved: Sequence[Sample]) -> list[tuple[Sample, list[Sample], Sample | None]]:
    """Maximal runs of failing resolved samples entered from a success (so above the first ok),
    each with the success below it and the one above it (None at the top)."""
    found, below, run = [], None, []
    for s in resolved:
        if s.outcome == "ok":
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
    failing = tuple(s for s in above if s.outcome != "ok")
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
    theirs = {s.ratio: s.overhead for s in dtr if s.outcome == "ok"}
    both = [s for s in samples if s.outcome == "ok" and s.ratio in theirs]
    return geomean([s.overhead / theirs[s.ratio] for s in both])


def _verdict(holds: bool) -> str:
    return "pass" if holds else "fail"


def _as_failures(samples: Sequence[Sample]) -> list[Sample]:
    return [s if s.resolved else replace(s, outcome="thrashed") for s in samples]


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
    stages, _ = GROUPS[group]
    own = series(runs, stages)
    mine = shape(own)
    first, stable = mine.first_ok, mine.stable_from
    # the baselines lines count thrashed runs below the first ok with Stage A's repeats
    thrashed = [s.ratio for s in runs if s.stage in stages and s.outcome == "thrashed"]
    below = [r for r in thrashed if first is not None and r < first]
    above = [t for t in mine.timeouts if stable is not None and t >= stable]
    against = versus_dtr(own, series(dtr_runs, stages)) if policy != REFERENCE else {}
    return FinalRow(
        group=group,
        trace=trace,
        policy=policy,
        samples=mine.samples,
        first_ok=first,
        failed_oom=sum(s.outcome == "oom" for s in mine.failing),
        failed_thrashed=sum(s.outcome == "thrashed" for s in mine.failing),
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
    by_series = _index(samples)
    return tuple(
        final_row(group, trace, policy, by_series[trace, policy], by_series[trace, REFERENCE])
        for group, (_, policies) in GROUPS.items()
        for trace in CONFIRMATORY
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
        outcomes = {s.outcome for s in runs if s.resolved} or {"timeout"}
        merged.append(replace(runs[0], outcome=outcomes.pop() if len(outcomes) == 1 else "mixed"))
    return merged


def confirmations(samples: Iterable[Sample]) -> dict[float, str]:
    """The confirmed outcome of every ratio run REPEATS times: at least two runs resolved, all
    alike. A timed-out repeat does not void a point (Table 1's footnote (a): InceptionV4 0.2423,
    two OOM and a timeout, confirmed under the Stage E rule), a lost one does (footnote (b):
    Unrolled GAN 0.237, two OOM and an interrupted run, not confirmed)."""
    confirmed = {}
    for ratio, runs in _by_ratio(samples).items():
        outcomes = [s.outcome for s in runs if s.resolved]
        if len(runs) >= REPEATS and len(outcomes) >= 2 and len(set(outcomes)) == 1:
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
    failing = sorted(r for r, o in confirmed.items() if first <= r <= last and o != "ok")
    low, high = (failing[0], failing[-1]) if failing else (first, last)
    oks = [r for r, o in confirmed.items() if o == "ok"]
    ok_below = max((r for r in oks if bounds[0] < r < low), default=None)
    ok_above = min((r for r in oks if high < r < bounds[1]), default=None)
    points = tuple(r for r in (ok_below, *failing, ok_above) if r is not None)
    status = "confirmed" if failing and None not in (ok_below, ok_above) else "not confirmed"
    top = above.ratio if above is not None else None
    return Region(trace, below.ratio, first, last, top, points, status)


def trace_regions(samples: Sequence[Sample], trace: str) -> tuple[Region, ...]:
    """Table 1's rows of one trace from DTR's runs on it."""
    stages, confirming = (("DEV",), ("DEV",)) if trace == DEV_TRACE else (REGION_STAGES, CONFIRMING)
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
    by_series = _index(samples)
    return tuple(
        region
        for trace in (DEV_TRACE, *CONFIRMATORY)
        for region in trace_regions(by_series.get((trace, REFERENCE), []), trace)
    )


# --- the comparison --------------------------------------------------------------------------


def _number(value: object) -> float | None:
    """A float column of a records row: None for a missing value (pandas gives NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def our_sample(row: Mapping) -> Sample:
    """A records-table row as a sample; a timeout has no outcome."""
    complete = row["status"] == "complete"
    outcome = row["outcome"] if complete else "timeout"
    if outcome not in ("ok", "oom", "thrashed", "timeout"):
        raise UserError(f"run {row.get('run_id')}", "outcome ok, oom or thrashed", repr(outcome))
    return Sample(
        stage=str(row["stage"]),
        trace=str(row["trace"]),
        policy=str(row["policy"]),
        ratio=float(row["ratio"]),
        budget=int(row["budget"]),
        repeat=int(row["repeat"]),
        outcome=outcome,
        overhead=_number(row.get("overhead")) if outcome == "ok" else None,
        run_id=str(row.get("run_id") or ""),
    )


def our_samples(ours: Iterable[Mapping] | object) -> list[Sample]:
    """Our runs in the compared stages (a list of records-table rows or a DataFrame); at one key
    a resolved run sorts after a timeout, so the rules read the resolved one."""
    rows = ours.to_dict("records") if hasattr(ours, "to_dict") else ours
    samples = [our_sample(r) for r in rows if r["stage"] in COMPARED]
    return sorted(samples, key=lambda s: (s.key, s.resolved, s.run_id))


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


def _judge(point: Point, mine: Sequence[Sample]) -> tuple[str, str]:
    """The verdict on one point: ok outcomes agree only with a bit-identical overhead."""
    resolved = [s for s in mine if s.resolved]
    if not mine:
        return "missing", "no run of ours"
    if len({s.text for s in resolved}) > 1:
        return "differs", "our runs disagree: " + ", ".join(sorted({s.text for s in resolved}))
    if point.status == "timeout":
        if not resolved:
            return "agree", "both timed out"
        return "resolved", f"to {resolved[0].outcome}"
    if not resolved:
        return "differs", "ours timed out"
    s = resolved[0]
    if s.outcome != point.status:
        return "differs", f"{point.status} in the study, {s.outcome} here"
    if s.outcome == "ok" and s.overhead != float(point.overhead):
        return "differs", f"overhead {point.overhead} in the study, {s.overhead!r} here"
    return "agree", ""


def _point_verdict(point: Point, mine: Sequence[Sample] | None) -> PointVerdict:
    if mine is None:
        verdict, detail = "not compared", "no simrd source"
    else:
        verdict, detail = _judge(point, mine)
    shown = [s for s in mine or () if s.resolved] or list(mine or ())
    return PointVerdict(
        run_id=point.run_id,
        stage=STAGES[point.stage],
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
        at[key] = [our_sample({**full, "budget": budget, "repeat": repeat})]
    return at


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


def _final_scopes(rows: Iterable[FinalRow]) -> dict[tuple[str, str], Scope]:
    return {("final", r.label): Scope(r.trace, r.policy, GROUPS[r.group][0]) for r in rows}


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


TABLE1_STAGES = (*REGION_STAGES, "DEV")


def _table1_scopes(published: Sequence[Region]) -> dict[tuple[str, str], Scope]:
    """Each published region reads DTR's runs between its neighbouring regions."""
    scopes = {}
    for i, p in enumerate(published):
        before = [r.last_fail for r in published[:i] if r.trace == p.trace]
        after = [r.first_fail for r in published[i + 1 :] if r.trace == p.trace]
        low, high = max(before, default=-math.inf), min(after, default=math.inf)
        scopes["table1", region_label(p)] = Scope(p.trace, REFERENCE, TABLE1_STAGES, low, high)
    return scopes


def _scope(scopes: Mapping[tuple[str, str], Scope], table: str, label: str) -> Scope:
    """A row's scope; a region only ours has (`<trace> extra <n>`) reads all of DTR's runs."""
    if (table, label) in scopes:
        return scopes[table, label]
    return Scope(label.split()[0], REFERENCE, TABLE1_STAGES)


def computed_cells(samples: Sequence[Sample], published: Published) -> dict[CellKey, str]:
    """Every cell of the final table (its published rows) and of Table 1 computed from
    `samples` by the rules."""
    rows = {r.label for r in published.final}
    final = final_cells(r for r in final_table(samples) if r.label in rows)
    return {**final, **table1_cells(published.table1, table1(samples))}


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
class Evidence:
    """What explains a differing cell: the study's timeouts our runs resolved, and our runs at
    points where the study has no valid run (with the reason it excluded a run there)."""

    resolved: tuple[tuple[Sample, Sample], ...]  # (the study's timeout, our resolved run)
    extra: tuple[Sample, ...]
    excluded: Mapping[Key, str]


def _evidence(study: Sequence[Sample], at: Mapping[Key, list[Sample]], pub: Published) -> Evidence:
    study_keys = {s.key for s in study}
    resolved = []
    for s in study:
        mine = [m for m in at.get(s.key, []) if m.resolved]
        if not s.resolved and mine:
            resolved.append((s, mine[-1]))
    extra = [m for key, runs in sorted(at.items()) if key not in study_keys for m in runs[-1:]]
    excluded = {p.sample.key: p.excluded for p in pub.points if not p.valid}
    return Evidence(tuple(resolved), tuple(extra), excluded)


def _replaced(study: Sequence[Sample], evidence: Evidence) -> list[Sample]:
    """The study's runs with each timeout our runs resolved replaced by ours."""
    ours = {s.run_id: mine for s, mine in evidence.resolved}
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


def explain(key: CellKey, scope: Scope, tabs: Recomputed, evidence: Evidence) -> str:
    """Why a cell of ours differs from the published one; ERROR when nothing explains it."""
    published, ours = tabs.published.get(key, ""), tabs.ours.get(key, "")
    study = tabs.study.get(key, "")
    if published and study != published:
        return f"ERROR: the study's rules give {study or '–'} from its own runs"
    pairs = [(s, m) for s, m in evidence.resolved if scope.holds(s, key[2])]
    timeouts = _timeouts_text(pairs)
    if tabs.replaced.get(key, "") == ours and pairs:
        return f"explained by resolved timeouts: {timeouts}"
    extra = [s for s in evidence.extra if scope.holds(s, key[2])]
    if tabs.extended.get(key, "") == ours and extra:
        return (
            f"explained by resolved timeouts and the extra points ours ran: timeouts {timeouts}; "
            f"extra {_extra_text(extra, evidence.excluded)}"
        )
    return f"ERROR: unexplained (resolved timeouts: {timeouts}; extra points: {len(extra)})"


def _cell_verdict(key: CellKey, scope: Scope, tabs: Recomputed, evidence: Evidence) -> CellVerdict:
    published, ours = tabs.published.get(key), tabs.ours.get(key, "")
    if published == "":  # the study gives no value here (a baseline line, DTR's own geo)
        verdict, why = "not published", ""
    elif published == ours:
        verdict, why = "equal", ""
    else:  # includes a region only ours has (no published cell at all)
        verdict, why = "differs", explain(key, scope, tabs, evidence)
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
    study: Sequence[Sample], mine: Sequence[Sample], evidence: Evidence, published: Published
) -> Recomputed:
    replaced = _replaced(study, evidence)
    return Recomputed(
        published={
            **final_cells(published.final),
            **table1_cells(published.table1, published.table1),
        },
        study=computed_cells(study, published),
        replaced=computed_cells(replaced, published),
        extended=computed_cells(replaced + list(evidence.extra), published),
        ours=computed_cells(mine, published),
    )


def _cells(tabs: Recomputed, evidence: Evidence, published: Published) -> tuple[CellVerdict, ...]:
    scopes = {**_final_scopes(published.final), **_table1_scopes(published.table1)}
    keys = dict.fromkeys([*tabs.ours, *tabs.published])
    return tuple(_cell_verdict(k, _scope(scopes, k[0], k[1]), tabs, evidence) for k in keys)


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
    evidence = _evidence(study, at, published)
    cells = _cells(_recomputed(study, mine, evidence, published), evidence, published)
    excluded = len(published.points) - len(published.valid)
    line, ok = verdict_line(points, cells, excluded)
    return Paper(points, cells, evidence.extra, excluded, line, ok)


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
        if point.policy == SIMRD and row is not None:
            found[point.sample.key] = {
                "run_id": f"simrd at {point.budget}",
                "status": "timeout" if row["simrd_outcome"] == "timeout" else "complete",
                "outcome": row["simrd_outcome"],
                "overhead": row["simrd_overhead"],
            }
    return found or None


def _ours_at(
    point: Point, at: Mapping[Key, list[Sample]], simrd_at: Mapping[Key, list[Sample]] | None
) -> list[Sample] | None:
    """Our runs at a point; None for a simrd point without a simrd source."""
    if point.policy != SIMRD:
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
    settled = [p for p in compared if p.published != "timeout"]
    timeouts = [p for p in compared if p.published == "timeout"]
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
    order = ("ok", "oom", "thrashed")
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


# --- output -------------------------------------------------------------------------------


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
    return (COMPARED.index(stage) if stage in COMPARED else len(COMPARED), trace, policy)


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
