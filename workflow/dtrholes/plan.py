"""Which simulation points each protocol stage asks for, and how they are split into jobs."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import yaml

from simulator import UserError


@dataclass(frozen=True)
class Point:
    """One requested run: a budget ratio and its repeat index."""

    ratio: float
    repeat: int


def read_protocol(path: str | Path) -> dict:
    """The protocol's parameters as a mapping."""
    try:
        protocol = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(str(path), "a readable YAML protocol", str(exc).splitlines()[0]) from None
    if not isinstance(protocol, dict):
        raise UserError(str(path), "a mapping of protocol parameters", type(protocol).__name__)
    return protocol


def grid(start: float, stop: float, step: float) -> list[float]:
    """Ratios from start to stop inclusive; each is the float nearest its decimal value."""
    count = round((stop - start) / step) + 1
    return [round(start + i * step, 10) for i in range(count)]


def stage_a_points(protocol: dict, trace: str) -> list[Point]:
    """Stage A: every grid ratio once, and a seeded share of them `count` times in all."""
    ratios = grid(**protocol["stage_a"]["ratios"])
    repeats = protocol["stage_a"]["repeats"]
    chosen = random.Random(f"{repeats['seed']}-{trace}").sample(
        ratios, math.ceil(repeats["share"] * len(ratios))
    )
    return [Point(r, i) for r in ratios for i in range(repeats["count"] if r in chosen else 1)]


def stage_c_points(protocol: dict, trace_index: int) -> list[Point]:
    """Stage C: seeded ratios on a fine grid strictly inside each Stage A interval."""
    spec = protocol["stage_c"]
    ratios = grid(**protocol["stage_a"]["ratios"])
    rng = random.Random(spec["seed"] + trace_index)
    points = []
    for low, high in zip(ratios, ratios[1:], strict=False):
        inside = grid(low, high, spec["step"])[1:-1]
        count = spec["dense"] if low < spec["dense_below"] else spec["sparse"]
        points += [Point(r, 0) for r in sorted(rng.sample(inside, count))]
    return points


def stage_points(protocol: dict, stage: str, trace: str, trace_index: int) -> list[Point]:
    """The points `stage` asks for on one trace."""
    if stage == "A":
        return stage_a_points(protocol, trace)
    return stage_c_points(protocol, trace_index)


def job_count(points: list[Point], per_job: int) -> int:
    return max(1, math.ceil(len(points) / per_job))


def job_points(points: list[Point], per_job: int, job: int) -> list[Point]:
    """The points of job `job` (0-based) when `points` are split `per_job` at a time."""
    return points[job * per_job : (job + 1) * per_job]
