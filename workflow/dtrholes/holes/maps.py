"""Exact feasibility maps: a byte range tiled with certified intervals, every budget accounted for.

A map is stored as its runs: one tile per run, the run's certified interval clipped to the chunk
it ran in, plus uncovered tiles where the run cap (or a timeout) stopped the tiling. A chunk
boundary inside a certified interval splits that interval into two tiles of the identical
execution; `canonical` merges them again, and every derived number (segments, holes, verdicts)
reads outcomes only, so nothing reported depends on how the range was split.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dtrholes.core import files
from dtrholes.holes.feasibility import ExactSummary, Hole
from dtrholes.study import records
from simulator import Result, UserError
from simulator.result import FAILING, OK, TIMEOUT

UNCOVERED = "uncovered"
RANGES_KEY = b"dtr_holes.map_ranges"

Run = Callable[[int], tuple[Result | None, str]]
"""A budget -> its Result (None: the run timed out) and its run id."""


class MapError(UserError):
    """A map table whose tiles leave a gap, overlap, or leave its ranges."""


@dataclass(frozen=True)
class Tile:
    """Budgets `first`..`last` (inclusive) end with `outcome`: that of the run at `run_budget`
    for a run's tile; `uncovered` where no run answered (then `reason` says why)."""

    first: int
    last: int
    outcome: str
    overhead: float | None = None
    run_id: str | None = None
    run_budget: int | None = None
    budget_lo: int | None = None  # the run's whole certified interval
    budget_hi: int | None = None  # None: unbounded above (or no run)
    chunk: int = 0
    reason: str | None = None

    @property
    def exact(self) -> bool:
        return self.outcome not in (UNCOVERED, TIMEOUT)

    @property
    def width(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class Span:
    """An inclusive byte range."""

    first: int
    last: int


def split(span: Span, count: int) -> list[Span]:
    """`span` cut into `count` contiguous chunks of (nearly) equal width; empty ones dropped."""
    width = span.last - span.first + 1
    cuts = [span.first + width * i // count for i in range(count + 1)]
    return [Span(a, b - 1) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def chunks(ranges: Iterable[Span], count: int) -> list[tuple[int, Span]]:
    """Every range cut into `count` chunks, each with its index within its range."""
    return [(i, c) for r in ranges for i, c in enumerate(split(r, count))]


def tile(
    run: Run,
    span: Span,
    max_runs: int,
    chunk: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Tile]:
    """Tile `span`: run at its first byte, keep the run's certified interval, continue just above
    it. After `max_runs` runs, or a timeout, the rest of the span is one uncovered tile."""
    tiles, budget, runs = [], span.first, 0
    while budget <= span.last and runs < max_runs:
        result, run_id = run(budget)
        runs += 1
        if result is None:
            tiles.append(Tile(budget, budget, TIMEOUT, None, run_id, budget, chunk=chunk))
            budget += 1
            break
        tiles.append(_run_tile(result, run_id, span, chunk))
        budget = tiles[-1].last + 1
        if progress is not None:
            progress(runs, budget - span.first)
    if budget <= span.last:
        why = "after a timeout" if tiles and tiles[-1].outcome == TIMEOUT else "run cap"
        tiles.append(Tile(budget, span.last, UNCOVERED, chunk=chunk, reason=why))
    return tiles


def _run_tile(result: Result, run_id: str, span: Span, chunk: int) -> Tile:
    hi = min(result.top(unbounded=span.last), span.last)
    return Tile(
        first=result.budget,
        last=hi,
        outcome=result.outcome,
        overhead=result.overhead,
        run_id=run_id,
        run_budget=result.budget,
        budget_lo=result.budget_lo,
        budget_hi=result.budget_hi,
        chunk=chunk,
    )


def check(tiles: list[Tile], ranges: list[Span], where: str) -> None:
    """Every byte of every range in exactly one tile, and no tile outside them."""
    expected = sorted(ranges, key=lambda s: s.first)
    for a, b in zip(expected, expected[1:], strict=False):
        if b.first <= a.last:
            raise MapError(where, "disjoint ranges", f"{_span(a)} and {_span(b)}")
    ordered = sorted(tiles, key=lambda t: (t.first, t.last))
    i = 0
    for span in expected:
        at = span.first
        while at <= span.last:
            if i == len(ordered) or ordered[i].first != at:
                found = "none" if i == len(ordered) else _span(ordered[i])
                raise MapError(where, f"a tile starting at byte {at:,}", found)
            if not ordered[i].first <= ordered[i].last <= span.last:
                raise MapError(where, f"a tile ending by byte {span.last:,}", _span(ordered[i]))
            at = ordered[i].last + 1
            i += 1
    if i < len(ordered):
        raise MapError(where, "no tile outside the mapped ranges", _span(ordered[i]))


def _span(s: Span | Tile) -> str:
    return f"bytes {s.first:,}..{s.last:,}"


def canonical(tiles: Iterable[Tile]) -> list[Tile]:
    """Adjacent tiles of one certified interval (a run split by a chunk boundary) merged into
    one, keeping the lower run: the tiling an unsplit range gives."""
    merged: list[Tile] = []
    for t in sorted(tiles, key=lambda t: t.first):
        last = merged[-1] if merged else None
        if last is not None and last.last + 1 == t.first and _same_run(last, t):
            merged[-1] = Tile(**{**asdict(last), "last": t.last, "chunk": 0})
        else:
            merged.append(Tile(**{**asdict(t), "chunk": 0}))
    return merged


def _same_run(a: Tile, b: Tile) -> bool:
    if not (a.exact and b.exact):
        return False
    return (a.outcome, a.overhead, a.budget_lo, a.budget_hi) == (
        b.outcome,
        b.overhead,
        b.budget_lo,
        b.budget_hi,
    )


# Tables -------------------------------------------------------------------------------------

SPAN_FIELDS = [  # a byte range of one trace × policy, as the map and hole tables store it
    ("trace", pa.string()),
    ("policy", pa.string()),
    ("first_byte", pa.int64()),
    ("last_byte", pa.int64()),
    ("first_ratio", pa.float64()),
    ("last_ratio", pa.float64()),
    ("width", pa.int64()),
]
SCHEMA = pa.schema(
    [
        *SPAN_FIELDS,
        ("outcome", pa.string()),  # ok, oom, thrashed, timeout, uncovered
        ("exact", pa.bool_()),
        ("overhead", pa.float64()),
        ("run_id", pa.string()),
        ("run_budget", pa.int64()),
        ("budget_lo", pa.int64()),
        ("budget_hi", pa.int64()),
        ("chunk", pa.int64()),
        ("reason", pa.string()),
    ]
)


@dataclass(frozen=True)
class Map:
    """One trace × policy's tiles over its mapped ranges, and the peak their ratios divide;
    `record_sha256`: each tile's record file's sha256 by run id (None: a map made without
    records, or before maps stated them)."""

    trace: str
    policy: str
    peak: int
    ranges: tuple[Span, ...]
    tiles: tuple[Tile, ...]
    record_sha256: dict[str, str] | None = None

    @property
    def runs(self) -> int:
        return sum(t.run_id is not None for t in self.tiles)


def to_table(m: Map) -> pa.Table:
    rows = [
        {
            "trace": m.trace,
            "policy": m.policy,
            "first_byte": t.first,
            "last_byte": t.last,
            "first_ratio": t.first / m.peak,
            "last_ratio": t.last / m.peak,
            "width": t.width,
            "exact": t.exact,
            **{k: v for k, v in asdict(t).items() if k not in ("first", "last")},
        }
        for t in sorted(m.tiles, key=lambda t: t.first)
    ]
    meta = {"trace": m.trace, "policy": m.policy, "peak": m.peak}
    meta["ranges"] = [[s.first, s.last] for s in m.ranges]
    if m.record_sha256 is not None:
        meta[records.SHA256_KEY] = m.record_sha256
    schema = SCHEMA.with_metadata({RANGES_KEY: json.dumps(meta).encode()})
    return pa.Table.from_pylist(rows, schema=schema)


def write(m: Map, path: Path) -> None:
    """Write a map's table, after checking it leaves no gap and no overlap."""
    check(list(m.tiles), list(m.ranges), str(path))
    files.write_table(to_table(m), path)


def read(path: Path) -> Map:
    """A map table written by `write`, checked again."""
    try:
        table = pq.read_table(path)
        meta = json.loads(table.schema.metadata[RANGES_KEY])
    except (OSError, KeyError, TypeError, pa.ArrowException) as exc:
        raise MapError(str(path), "a map table (Parquet, with its ranges)", repr(exc)) from None
    fields = set(Tile.__dataclass_fields__)
    tiles = tuple(
        Tile(first=r["first_byte"], last=r["last_byte"], **{k: r[k] for k in fields & set(r)})
        for r in table.to_pylist()
    )
    ranges = tuple(Span(a, b) for a, b in meta["ranges"])
    m = Map(meta["trace"], meta["policy"], meta["peak"], ranges, tiles, stated_sha256(meta))
    check(list(m.tiles), list(m.ranges), str(path))
    return m


def merge(maps: list[Map], where: str) -> Map:
    """Maps of one trace × policy over disjoint ranges (chunks of a range included) as one."""
    keys = {(m.trace, m.policy, m.peak) for m in maps}
    if len(keys) != 1:
        raise MapError(where, "maps of one trace, policy and peak", f"{len(keys)} of them")
    trace, policy, peak = keys.pop()
    ranges = tuple(union(s for m in maps for s in m.ranges))
    tiles = tuple(sorted((t for m in maps for t in m.tiles), key=lambda t: t.first))
    merged = Map(trace, policy, peak, ranges, tiles, _merged_sha256(maps))
    check(list(tiles), list(ranges), where)
    return merged


def _merged_sha256(maps: list[Map]) -> dict[str, str] | None:
    if any(m.record_sha256 is None for m in maps):
        return None
    return dict(sorted(x for m in maps for x in m.record_sha256.items()))


def stated_sha256(meta: dict) -> dict[str, str] | None:
    """The record checksums a map's metadata states (None: none, it predates them)."""
    return meta.get(records.SHA256_KEY)


def listing(path: Path) -> tuple[list[str], dict[str, str] | None]:
    """A map table's run ids and the record checksums it states, read without its tiles."""
    table = pq.read_table(path, columns=["run_id"])
    run_ids = [r for r in table.column("run_id").to_pylist() if r is not None]
    return run_ids, stated_sha256(json.loads(table.schema.metadata[RANGES_KEY]))


def union(spans: Iterable[Span]) -> list[Span]:
    """The union of byte ranges as disjoint ranges, in order (overlapping or adjacent joined)."""
    joined: list[Span] = []
    for s in sorted(spans, key=lambda s: s.first):
        if joined and s.first <= joined[-1].last + 1:
            joined[-1] = Span(joined[-1].first, max(joined[-1].last, s.last))
        else:
            joined.append(s)
    return joined


# What a map shows ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A maximal run of budgets with one feasibility: ok, failing, or uncovered."""

    first: int
    last: int
    kind: str

    @property
    def width(self) -> int:
        return self.last - self.first + 1


def kind_of(outcome: str) -> str:
    if outcome == OK:
        return OK
    return "failing" if outcome in FAILING else UNCOVERED


def segments(tiles: Iterable[Tile]) -> list[Segment]:
    """Tiles merged by feasibility; bytes between mapped ranges count as uncovered."""
    found: list[Segment] = []
    for t in sorted(tiles, key=lambda t: t.first):
        kind = kind_of(t.outcome)
        if found and found[-1].last + 1 < t.first:
            found.append(Segment(found[-1].last + 1, t.first - 1, UNCOVERED))
        if found and found[-1].kind == kind:
            found[-1] = Segment(found[-1].first, t.last, kind)
        else:
            found.append(Segment(t.first, t.last, kind))
    return found


def summarise(m: Map) -> ExactSummary:
    """A map's first success and its holes: the failing segments above it, exact when
    completing budgets bound them on both sides (else an uncovered stretch, or the end of the
    range, bounds them)."""
    segs = segments(m.tiles)
    first_ok = next((i for i, s in enumerate(segs) if s.kind == OK), None)
    later = [] if first_ok is None else range(first_ok + 1, len(segs))
    holes = tuple(_hole(segs, i) for i in later if segs[i].kind == "failing")
    covered = sum(t.width for t in m.tiles if t.exact)
    return ExactSummary(
        runs=m.runs,
        covered=covered,
        uncovered=sum(s.last - s.first + 1 for s in m.ranges) - covered,
        first_success=None if first_ok is None else segs[first_ok].first,
        holes=holes,
    )


def _hole(segs: list[Segment], i: int) -> Hole:
    """The failing segment `segs[i]` as a hole, bounded where a neighbour completes."""
    failing, below = segs[i], segs[i - 1]
    above = segs[i + 1] if i + 1 < len(segs) else None
    ok_below = below.last if below.kind == OK else None
    ok_above = above.first if above is not None and above.kind == OK else None
    exact = ok_below is not None and ok_above is not None
    return Hole(failing.first, failing.last, ok_below, ok_above, failing.width, exact)


def outcome_at(m: Map, budget: int) -> str | None:
    """The outcome the map gives a budget (None: outside the mapped ranges)."""
    for t in m.tiles:
        if t.first <= budget <= t.last:
            return t.outcome
    return None


def estimate_runs(results: list[Result], span: Span) -> int:
    """Runs a tiling of `span` may take, from sampled runs' certified widths: each gap between
    consecutive samples is crossed at the narrower of its two ends' widths. Widths collapse
    near transitions, so this is a rough lower estimate."""
    inside = sorted(
        (r for r in results if span.first <= r.budget <= span.last), key=lambda r: r.budget
    )
    if len(inside) < 2:
        return span.last - span.first + 1
    total = 0
    for a, b in zip(inside, inside[1:], strict=False):
        width = min(_width(a), _width(b))
        total += -(-(b.budget - a.budget) // width)
    return total + 1


def _width(r: Result) -> int:
    return max(1, r.top(unbounded=2**62) - r.budget_lo + 1)
