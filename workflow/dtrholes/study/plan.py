"""Which simulation points each protocol stage asks for, and the protocol values each job reads."""

from __future__ import annotations

import csv
import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dtrholes.core import paths
from dtrholes.core.samples import Sample
from dtrholes.study.parameters import Grid, Parameters, StageB
from dtrholes.study.protocol import Protocol
from simulator import get_policy

# The protocol parameters each kind of job reads, besides its policy's own parameters. A job's
# parameters hold exactly these values, so an amendment reruns the jobs that read what it changed.
READS = {
    paths.STAGE_A: ["traces", "stage_a", "limits"],
    paths.STAGE_C: ["traces", "stage_a/ratios", "stage_c", "limits"],
    paths.STAGE_B: ["stage_b/step", "limits"],
    paths.EDGE: ["edges", "limits"],
    paths.REPEAT: ["confirmation/repeats", "confirmation/points", "limits"],
    paths.EXPLAIN: ["explain", "limits"],
    paths.MAP: ["maps/max_runs", "limits"],
    "map-plan": ["stage_a/ratios", "maps/margin", "maps/whole_range_cap"],
    "refine": [
        "frozen",
        "stage_a/ratios",
        "stage_b/triggers",
        "stage_b/overhead_change",
        "stage_b/study",
    ],
}


def is_sample(stage: str) -> bool:
    """Whether a record's stage makes it a sample of its trace × policy's series (the sampled
    stages and the protocol's point stages), not a run derived from the series."""
    return stage not in paths.DERIVED


@dataclass(frozen=True)
class Point:
    """One requested run: a budget ratio and its repeat index."""

    ratio: float
    repeat: int


def job_spec(protocol: Protocol, kind: str, policy: str | None = None) -> dict:
    """The protocol values (and the amendments behind them) a job of `kind` depends on."""
    reads = READS.get(kind, [f"points/{kind}", "limits"])  # a point stage: its points
    keys = reads + ([f"policies/{policy}"] if policy else [])
    spec = protocol.slice(keys)
    found = protocol.params.policies.get(policy) if policy else None
    source = found.source if found else None
    if source is not None:  # its content defines the runs: an edit reruns this policy's jobs
        spec["policy_sha256"] = get_policy(source).source_sha256
    return spec


def parameters(spec: dict) -> Parameters:
    """A job spec's values as typed parameters (those the job does not read: None)."""
    nested: dict = {}
    for path, value in spec["values"].items():
        *parents, key = path.split("/")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    return Parameters.from_dict(nested)


def grid(start: float, stop: float, step: float) -> list[float]:
    """Ratios from start to stop inclusive; each is the float nearest its decimal value."""
    count = round((stop - start) / step) + 1
    return [round(start + i * step, 10) for i in range(count)]


def grid_of(ratios: Grid) -> list[float]:
    return grid(ratios.start, ratios.stop, ratios.step)


def ratios_of(ratios: Grid | tuple[float, ...]) -> list[float]:
    """A point set's ratios: a grid or a list."""
    return grid_of(ratios) if isinstance(ratios, Grid) else [float(r) for r in ratios]


def sampled_traces(params: Parameters, broad: bool = False) -> list[str]:
    """The traces of Stages A, B and C in the study's order (its index seeds Stage C): the
    confirmatory ones, and with the broader sweep the development ones after them."""
    roles = params.traces
    return [*roles.confirmatory, *(roles.development if broad else ())]


def stage_policies(params: Parameters, stage: str, broad: bool = False) -> list[str]:
    """The policies a sampled stage runs: Stage A every policy; Stages B and C the frozen
    ones (the study's), or every policy with the broader sweep."""
    if stage == paths.STAGE_A or broad:
        return list(params.policies)
    return [p for p in params.policies if p in params.frozen]


def trace_seed(sha256: str) -> int:
    """The seed of an own trace's draws (it has no place in the protocol's order): the first 64
    bits of its sha256."""
    return int(sha256[:16], 16)


def stage_a_points(
    params: Parameters, trace: str, broad: bool = False, own_sha256: str | None = None
) -> list[Point]:
    """Stage A: every grid ratio once, and a seeded share of them `count` times in all. One
    generator draws the repeated ratios of every trace in the study's order, as the study did;
    an own trace (`own_sha256` given) has its own, seeded with `seed` plus its `trace_seed`."""
    ratios = grid_of(params.stage_a.ratios)
    repeats = params.stage_a.repeats
    share = round(repeats.share * len(ratios))
    if own_sha256 is not None:
        chosen = random.Random(repeats.seed + trace_seed(own_sha256)).sample(ratios, share)
    else:
        rng = random.Random(repeats.seed)
        draws = {name: rng.sample(ratios, share) for name in sampled_traces(params, broad)}
        if trace not in draws:
            return []
        chosen = draws[trace]
    counts = [repeats.count if r in chosen else 1 for r in ratios]
    return [Point(r, i) for r, n in zip(ratios, counts, strict=True) for i in range(n)]


def stage_c_points(
    params: Parameters, trace: str, broad: bool = False, own_sha256: str | None = None
) -> list[Point]:
    """Stage C, the study's draw: per trace a generator seeded with `seed` plus the trace's
    index in the study's order (an own trace: plus its `trace_seed`); in each Stage A interval
    (low = start + i * step, unrounded) `dense` samples below `dense_below`, else `sparse`, each
    low + fine step * randint(1, n - 1) rounded to the fine grid, n fine steps per interval.
    Equal draws are run once."""
    traces = sampled_traces(params, broad)
    if params.stage_c is None or (trace not in traces and own_sha256 is None):
        return []
    spec, a = params.stage_c, params.stage_a.ratios
    offset = trace_seed(own_sha256) if own_sha256 is not None else traces.index(trace)
    rng = random.Random(spec.seed + offset)
    fine = round(a.step / spec.step)
    digits = -math.floor(math.log10(spec.step) + 1e-9)
    ratios = []
    for i in range(len(grid_of(a)) - 1):
        low = a.start + a.step * i
        count = spec.dense if low < spec.dense_below else spec.sparse
        ratios += [round(low + spec.step * rng.randint(1, fine - 1), digits) for _ in range(count)]
    return [Point(r, 0) for r in sorted(set(ratios))]


def stage_b_points(params: Parameters, intervals: list[list[float]]) -> list[Point]:
    """Stage B: the refinement grid strictly inside every selected interval."""
    step = params.stage_b.step
    return [Point(r, 0) for low, high in intervals for r in grid(low, high, step)[1:-1]]


def set_points(params: Parameters, stage: str, trace: str, policy: str) -> list[Point]:
    """The points a protocol point stage (development, confirmation) asks of a trace × policy."""
    points = [
        Point(r, i)
        for spec in params.points.get(stage, ())
        if spec.trace == trace and spec.runs(policy)
        for r in ratios_of(spec.ratios)
        for i in spec.repeats
    ]
    return list(dict.fromkeys(points))  # a point two sets share runs once


def planned_points(params: Parameters, broad: bool = False) -> list[tuple[str, str, str, Point]]:
    """Every (stage, trace, policy, point) of the stages that do not depend on outcomes: Stage
    A, Stage C and the point stages, in the protocol's trace and policy order."""
    traces = [*params.traces.confirmatory, *params.traces.development]
    planned = []
    for stage in paths.planned(params.points):
        for trace in traces:
            for policy in params.policies:
                planned += [
                    (stage, trace, policy, p)
                    for p in stage_points(params, stage, trace, policy, broad)
                ]
    return planned


def stage_points(
    params: Parameters,
    stage: str,
    trace: str,
    policy: str,
    broad: bool = False,
    own_sha256: str | None = None,
) -> list[Point]:
    """The points a stage that does not depend on outcomes (all but B) asks of a trace × policy;
    an own trace (`own_sha256` given) runs the broader sweep's samples, seeded by its sha256."""
    own = own_sha256 is not None
    if stage in paths.SAMPLED and policy not in stage_policies(params, stage, broad or own):
        return []
    if stage == paths.STAGE_A:
        return stage_a_points(params, trace, broad, own_sha256)
    if stage == paths.STAGE_C:
        return stage_c_points(params, trace, broad, own_sha256)
    return [] if own else set_points(params, stage, trace, policy)


def refine_intervals(
    params: Parameters, samples: list[Sample], study: Iterable[float] = ()
) -> list[dict]:
    """The Stage A intervals Stage B refines, each with the triggers that selected it on
    `samples` and whether the study refined it (`study`: ratios of the study's Stage B runs).
    The study's trigger read its timeouts, which runs here resolve, so its intervals are
    refined whatever the trigger finds here."""
    stage_b = params.stage_b
    ratios = grid_of(params.stage_a.ratios)
    ends: dict[str, dict[float, Sample]] = defaultdict(dict)
    inside: dict[tuple[str, int], list[Sample]] = defaultdict(list)
    for s in samples:
        if s.stage == paths.STAGE_A:
            ends[s.policy][s.ratio] = s
        else:
            inside[s.policy, _interval_of(ratios, s.ratio)].append(s)
    refined = {_interval_of(ratios, r) for r in study}
    selected = []
    for i, (low, high) in enumerate(zip(ratios, ratios[1:], strict=False)):
        reasons = set()
        for policy, at in ends.items():
            if low in at and high in at:
                a, b = at[low], at[high]
                reasons |= _triggers(stage_b, a, b, inside[policy, i])
        if reasons or i in refined:
            selected.append(
                {"low": low, "high": high, "triggers": sorted(reasons), "study": i in refined}
            )
    return selected


def study_refined(evidence: Path, trace: str) -> list[float]:
    """The ratios of the study's Stage B runs on a trace, from its evidence table."""
    with open(evidence, newline="", encoding="utf-8") as f:
        return [
            float(r["ratio"])
            for r in csv.DictReader(f)
            if (r["stage"], r["trace"]) == (paths.STAGE_B, trace)
        ]


def _triggers(stage_b: StageB, a: Sample, b: Sample, interior: list[Sample]) -> set[str]:
    wanted, found = stage_b.triggers, set()
    if "status" in wanted and a.outcome != b.outcome:
        found.add("status")
    both = a.overhead is not None and b.overhead is not None
    if "overhead" in wanted and both and _changed(a.overhead, b.overhead, stage_b):
        found.add("overhead")
    if "stage_c" in wanted and any(s.outcome not in (a.outcome, b.outcome) for s in interior):
        found.add("stage_c")
    return found


def _changed(x: float, y: float, stage_b: StageB) -> bool:
    """Whether two overheads differ by more than the protocol's share of the smaller."""
    return max(x, y) > (1 + stage_b.overhead_change) * min(x, y)


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
