"""Which simulation points each protocol stage asks for, and the protocol values each job reads."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass

from dtrholes.protocol import Protocol

# The protocol parameters each kind of job reads, besides its policy's own parameters. A job's
# parameters hold exactly these values, so an amendment reruns the jobs that read what it changed.
READS = {
    "A": ["stage_a", "limits"],
    "C": ["stage_a/ratios", "stage_c", "limits"],
    "B": ["stage_b/step", "limits"],
    "edge": ["edges", "limits"],
    "repeat": ["confirmation/repeats", "confirmation/points", "limits"],
    "explain": ["explain", "limits"],
    "map": ["maps/max_runs", "limits"],
    "map-plan": ["stage_a/ratios", "maps/margin", "maps/whole_range_cap"],
}
REFINE_READS = ["stage_a/ratios", "stage_b/triggers", "stage_b/overhead_change"]


@dataclass(frozen=True)
class Point:
    """One requested run: a budget ratio and its repeat index."""

    ratio: float
    repeat: int


@dataclass(frozen=True)
class Sample:
    """A run's outcome at a ratio, as refinement reads it (overhead of completed runs only)."""

    policy: str
    stage: str
    ratio: float
    outcome: str
    overhead: float | None


def job_spec(protocol: Protocol, kind: str, policy: str | None = None) -> dict:
    """The protocol values (and the amendments behind them) a job of `kind` depends on."""
    paths = READS.get(kind, REFINE_READS) + ([f"policies/{policy}"] if policy else [])
    return protocol.slice(paths)


def parameters(spec: dict) -> dict:
    """A job spec's values as nested parameters, the shape of the protocol's own."""
    nested: dict = {}
    for path, value in spec["values"].items():
        *parents, key = path.split("/")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    return nested


def grid(start: float, stop: float, step: float) -> list[float]:
    """Ratios from start to stop inclusive; each is the float nearest its decimal value."""
    count = round((stop - start) / step) + 1
    return [round(start + i * step, 10) for i in range(count)]


def stage_a_points(params: dict, trace: str) -> list[Point]:
    """Stage A: every grid ratio once, and a seeded share of them `count` times in all."""
    ratios = grid(**params["stage_a"]["ratios"])
    repeats = params["stage_a"]["repeats"]
    chosen = random.Random(f"{repeats['seed']}-{trace}").sample(
        ratios, math.ceil(repeats["share"] * len(ratios))
    )
    return [Point(r, i) for r in ratios for i in range(repeats["count"] if r in chosen else 1)]


def stage_c_points(params: dict, trace_index: int) -> list[Point]:
    """Stage C: seeded ratios on a fine grid strictly inside each Stage A interval."""
    spec = params["stage_c"]
    ratios = grid(**params["stage_a"]["ratios"])
    rng = random.Random(spec["seed"] + trace_index)
    points = []
    for low, high in zip(ratios, ratios[1:], strict=False):
        inside = grid(low, high, spec["step"])[1:-1]
        count = spec["dense"] if low < spec["dense_below"] else spec["sparse"]
        points += [Point(r, 0) for r in sorted(rng.sample(inside, count))]
    return points


def stage_b_points(params: dict, intervals: list[list[float]]) -> list[Point]:
    """Stage B: the refinement grid strictly inside every selected interval."""
    step = params["stage_b"]["step"]
    return [Point(r, 0) for low, high in intervals for r in grid(low, high, step)[1:-1]]


def refine_intervals(params: dict, samples: list[Sample]) -> list[dict]:
    """The Stage A intervals Stage B refines, each with the triggers that selected it."""
    stage_b = params["stage_b"]
    ratios = grid(**params["stage_a"]["ratios"])
    ends: dict[str, dict[float, Sample]] = defaultdict(dict)
    inside: dict[tuple[str, int], list[Sample]] = defaultdict(list)
    for s in samples:
        if s.stage == "A":
            ends[s.policy][s.ratio] = s
        else:
            inside[s.policy, _interval_of(ratios, s.ratio)].append(s)
    selected = []
    for i, (low, high) in enumerate(zip(ratios, ratios[1:], strict=False)):
        reasons = set()
        for policy, at in ends.items():
            if low in at and high in at:
                a, b = at[low], at[high]
                reasons |= _triggers(stage_b, a, b, inside[policy, i])
        if reasons:
            selected.append({"low": low, "high": high, "triggers": sorted(reasons)})
    return selected


def _triggers(stage_b: dict, a: Sample, b: Sample, interior: list[Sample]) -> set[str]:
    wanted, found = stage_b["triggers"], set()
    if "status" in wanted and a.outcome != b.outcome:
        found.add("status")
    both = a.overhead is not None and b.overhead is not None
    if "overhead" in wanted and both and _changed(a.overhead, b.overhead, stage_b):
        found.add("overhead")
    if "stage_c" in wanted and any(s.outcome not in (a.outcome, b.outcome) for s in interior):
        found.add("stage_c")
    return found


def _changed(x: float, y: float, stage_b: dict) -> bool:
    """Whether two overheads differ by more than the protocol's share of the smaller."""
    return max(x, y) > (1 + stage_b["overhead_change"]) * min(x, y)


def _interval_of(ratios: list[float], ratio: float) -> int:
    """Index of the Stage A interval strictly containing `ratio` (-1 outside every one)."""
    for i, (low, high) in enumerate(zip(ratios, ratios[1:], strict=False)):
        if low < ratio < high:
            return i
    return -1


def format_points(points: list[Point]) -> str:
    """Points as a job's parameter: RATIO:REPEAT, comma-separated."""
    return ",".join(f"{p.ratio!r}:{p.repeat}" for p in points)


def parse_points(text: str) -> list[Point]:
    """The points that `format_points` wrote."""
    try:
        return [Point(float(r), int(i)) for r, i in (item.split(":") for item in text.split(","))]
    except ValueError:
        raise ValueError(f"expected RATIO:REPEAT[,RATIO:REPEAT...], found {text!r}") from None


def job_count(points: list[Point], per_job: int) -> int:
    return max(1, math.ceil(len(points) / per_job))


def job_points(points: list[Point], per_job: int, job: int) -> list[Point]:
    """The points of job `job` (0-based) when `points` are split `per_job` at a time."""
    return points[job * per_job : (job + 1) * per_job]
