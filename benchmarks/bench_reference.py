"""Times the simulator on every simrd reference run and compares with simrd's recorded wall time.

A benchmark, not a test: it prints one row per reference run as it completes (our best-of-N
wall time, the speed-up over simrd, and whether the result still equals simrd's), then
aggregates. Exit status 1 if any result differs from the reference, else 0.

    DTR_HOLES_ARCHIVE=../shared/traces/dtr-logs.zip .venv/bin/python benchmarks/bench_reference.py
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from dtrholes.traces import fetch
from simulator import Result, UserError, kernel, parse_trace, peak_memory, simulate
from simulator.trace import Trace

REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE = REPO_ROOT / "tests" / "data" / "simrd_reference.jsonl"
TARGET_SPEEDUP = 100.0  # what the slow points must reach
SLOW_S = 10.0  # simrd wall time above which a point counts as slow
PEAK_TARGET_S = 2.0  # all eight unconstrained peaks together
CHECKED = ("outcome", "clock", "evictions", "eviction_seq_sha256")
OUTCOMES = {"complete": "ok"}  # simrd's outcome names that ours spell differently
COLUMNS = ("trace", "heuristic", "ratio", "simrd s", "ours s", "speed-up", "flag")
WIDTHS = (12, 15, 17, 9, 9, 9, 24)

T = TypeVar("T")


@dataclass(frozen=True)
class Point:
    """One timed reference run."""

    trace: str
    heuristic: str
    ratio: str
    wall_s: float
    ours_s: float
    mismatches: tuple[str, ...]

    @property
    def speedup(self) -> float:
        return self.wall_s / max(self.ours_s, 1e-9)

    @property
    def slow(self) -> bool:
        return self.wall_s > SLOW_S

    @property
    def flag(self) -> str:
        flags = ["MISMATCH"] if self.mismatches else []
        if self.slow and self.speedup < TARGET_SPEEDUP:
            flags.append(f"below {TARGET_SPEEDUP:g}x")
        return ", ".join(flags)

    def cells(self) -> tuple[str, ...]:
        times = (f"{self.wall_s:.3f}", f"{self.ours_s:.4f}", f"{self.speedup:.0f}x")
        return (self.trace, self.heuristic, self.ratio, *times, self.flag)


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """The shortest wall time of `repeat` calls, and the last call's value."""
    best = math.inf
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def say(text: str = "") -> None:
    print(text, flush=True)


def read_reference(path: Path) -> tuple[list[dict], list[dict]]:
    """The reference file's baseline lines and run lines."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["kind"] == "baseline"], [r for r in rows if r["kind"] == "run"]


def select(runs: list[dict], substring: str | None, min_wall: float) -> list[dict]:
    """Runs whose trace or heuristic contains `substring` (any case) and took simrd >= min_wall."""
    needle = (substring or "").lower()
    return [
        r
        for r in runs
        if r["wall_s"] >= min_wall
        and (needle in r["trace"].lower() or needle in r["heuristic"].lower())
    ]


def ratio_label(run: dict) -> str:
    if run.get("ratio") is not None:
        return f"{run['ratio']:g}"
    return f"{run['ratio_of_v2eager_peak']:g} of v2eager"


def load_traces(names: Iterable[str], archive: str | None) -> dict[str, Trace]:
    data_dir = fetch.default_data_dir()
    return {name: fetch.load_trace(name, data_dir, archive) for name in names}


def warmup_trace() -> Trace:
    """A tiny chain that a small budget forces to evict and rematerialize."""
    lines = [{"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"}]
    lines += [{"INSTRUCTION": "CONSTANT", "NAME": "c"}]
    lines += [{"INSTRUCTION": "MEMORY", "NAME": "c", "MEMORY": "10"}]
    args = [["c"], ["x1"], ["x2"], ["x3"], ["x4"], ["x5"], ["x6", "x2"], ["y7", "x1"]]
    results = ["x1", "x2", "x3", "x4", "x5", "x6", "y7", "y8"]
    for result, arg in zip(results, args, strict=True):
        lines += [
            {"INSTRUCTION": "CALL", "RESULT": [result], "NAME": "f", "ARGS": arg, "TIME": "5"}
        ]
        lines += [{"INSTRUCTION": "MEMORY", "NAME": result, "MEMORY": "100"}]
        lines += [{"INSTRUCTION": "ALIAS", "NAME": result, "ALIAS": "-1"}]
    lines += [{"INSTRUCTION": "RELEASE", "NAME": name} for name in results[:-1]]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return parse_trace(data, "warmup.log", "warmup")


def warm_up(heuristics: Iterable[str]) -> None:
    """Compile (or load from numba's cache) the kernel, one tiny run per policy."""
    trace = warmup_trace()
    total = 0.0
    for heuristic in heuristics:
        seconds, result = best_of(1, lambda h=heuristic: simulate(trace, 450, h))
        total += seconds
        say(f"  {heuristic:<15} {seconds:8.3f} s  ({result.outcome}, {result.evictions} evictions)")
    say(f"compilation (first calls): {total:.3f} s, kernel {kernel_source()}")


def kernel_source() -> str:
    """Whether numba compiled the replay kernel here or loaded it from its on-disk cache."""
    stats = getattr(kernel.replay, "stats", None)
    if stats is None:
        return "origin unknown"
    if stats.cache_misses:
        return "compiled (force this with NUMBA_CACHE_DIR=$(mktemp -d))"
    if stats.cache_hits:
        return "loaded from numba's cache (to time a compile: NUMBA_CACHE_DIR=$(mktemp -d))"
    return "origin unknown"


def check_baselines(traces: dict[str, Trace], baselines: list[dict], repeat: int) -> list[str]:
    """Time all unconstrained peaks together and check them; returns summary lines."""
    first, _ = best_of(1, lambda: [peak_memory(traces[b["trace"]]) for b in baselines])
    say(f"peak_memory, all {len(baselines)} traces, first pass (builds layouts): {first:.3f} s")
    seconds, peaks = best_of(repeat, lambda: [peak_memory(traces[b["trace"]]) for b in baselines])
    verdict = "under" if seconds < PEAK_TARGET_S else "NOT under"
    problems = [
        f"{b['trace']}: peak {peak} != max_memory_v2eager {b['max_memory_v2eager']}"
        for b, peak in zip(baselines, peaks, strict=True)
        if peak != b["max_memory_v2eager"]
    ]
    for problem in problems:
        say(f"!!! BASELINE MISMATCH {problem}")
    summary = f"peak_memory, all {len(baselines)} traces: {seconds:.3f} s (best of {repeat}), "
    summary += f"{verdict} {PEAK_TARGET_S:g} s; {len(baselines) - len(problems)}/{len(baselines)} "
    summary += "equal max_memory_v2eager"
    say(summary)
    return [summary] + [f"BASELINE MISMATCH {p}" for p in problems]


def compare(run: dict, result: Result) -> tuple[str, ...]:
    """The checked fields where our result differs from simrd's."""
    ours = {field: getattr(result, field) for field in CHECKED}
    theirs = {field: run[field] for field in CHECKED}
    theirs["outcome"] = OUTCOMES.get(run["outcome"], run["outcome"])
    return tuple(
        f"{field}: simrd {theirs[field]!r}, ours {ours[field]!r}"
        for field in CHECKED
        if ours[field] != theirs[field]
    )


def time_run(run: dict, trace: Trace, repeat: int, policy: str | None) -> Point:
    """Time one reference point, with its own heuristic (checked against simrd's result) or,
    given `policy`, with that policy at the same budget (timed only)."""
    name = policy or run["heuristic"]
    seconds, result = best_of(repeat, lambda: simulate(trace, run["budget"], name))
    mismatches = compare(run, result) if policy is None else ()
    return Point(run["trace"], name, ratio_label(run), run["wall_s"], seconds, mismatches)


def text_row(cells: Iterable[str]) -> str:
    return "  ".join(f"{cell:<{width}}" for cell, width in zip(cells, WIDTHS, strict=True)).rstrip()


def markdown_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def aggregate(points: list[Point]) -> list[str]:
    """Summary lines: counts, geometric-mean speed-up, the slow points, total times."""
    if not points:
        return ["points: 0"]
    geomean = math.exp(sum(math.log(p.speedup) for p in points) / len(points))
    slow = [p for p in points if p.slow]
    lines = [f"points: {len(points)}", f"geometric-mean speed-up: {geomean:.1f}x"]
    if slow:
        worst = min(slow, key=lambda p: p.speedup)
        meeting = sum(p.speedup >= TARGET_SPEEDUP for p in slow)
        lines.append(
            f"points with simrd wall > {SLOW_S:g} s: {len(slow)}; minimum speed-up "
            f"{worst.speedup:.1f}x ({worst.trace} {worst.heuristic} {worst.ratio}); "
            f"{meeting}/{len(slow)} meet >= {TARGET_SPEEDUP:g}x"
        )
    else:
        lines.append(f"points with simrd wall > {SLOW_S:g} s: 0")
    simrd, ours = sum(p.wall_s for p in points), sum(p.ours_s for p in points)
    lines.append(f"total time: simrd {simrd:.1f} s, ours {ours:.2f} s ({simrd / ours:.0f}x)")
    bad = sum(bool(p.mismatches) for p in points)
    lines.append(f"results equal to simrd's: {len(points) - bad}/{len(points)}")
    return lines


def write_markdown(path: Path, points: list[Point], summary: list[str], repeat: int) -> None:
    lines = ["# Simulator speed against simrd's reference runs", ""]
    lines += [f"Our time: best of {repeat} `simulate` calls (wall, `time.perf_counter`).", ""]
    lines += [markdown_row(COLUMNS), markdown_row("---" for _ in COLUMNS)]
    lines += [markdown_row(p.cells()) for p in points]
    lines += [""] + [f"- {line}" for line in summary]
    for p in points:
        lines += [f"- MISMATCH {p.trace} {p.heuristic} {p.ratio}: {m}" for m in p.mismatches]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_points(runs, traces: dict[str, Trace], repeat: int, policy: str | None) -> list[Point]:
    say(text_row(COLUMNS))
    points = []
    for run in runs:
        point = time_run(run, traces[run["trace"]], repeat, policy)
        say(text_row(point.cells()))
        for mismatch in point.mismatches:
            say(f"!!! MISMATCH {point.trace} {point.heuristic} {point.ratio}: {mismatch}")
        points.append(point)
    return points


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", help="only runs whose trace or heuristic contains this")
    parser.add_argument(
        "--min-wall",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="only runs that took simrd at least this long",
    )
    parser.add_argument("--repeat", type=int, default=3, help="time the best of N calls")
    parser.add_argument(
        "--policy",
        help="time this registered policy at simrd's DTR reference budgets instead (speed-ups"
        " are then against simrd's DTR time there, a proxy: simrd has no such policy)",
    )
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="also write a Markdown table")
    parser.add_argument("--archive", help="trace archive file or URL (default $DTR_HOLES_ARCHIVE)")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    baselines, runs = read_reference(args.reference)
    runs = select(runs, args.filter, args.min_wall)
    if args.policy:
        runs = [r for r in runs if r["heuristic"] == "DTR"]
    seconds, traces = best_of(1, lambda: load_traces([b["trace"] for b in baselines], args.archive))
    say(f"loaded {len(traces)} traces in {seconds:.2f} s")
    say("warm-up, one tiny run per policy:")
    warm_up(
        [args.policy] if args.policy else dict.fromkeys(r["heuristic"] for r in runs) or ["DTR"]
    )
    peak_lines = check_baselines(traces, baselines, args.repeat)
    say()
    points = run_points(runs, traces, args.repeat, args.policy)
    summary = aggregate(points) + peak_lines
    say()
    for line in summary:
        say(line)
    if args.markdown:
        write_markdown(args.markdown, points, summary, args.repeat)
        say(f"wrote {args.markdown}")
    failed = any(p.mismatches for p in points) or any("MISMATCH" in line for line in peak_lines)
    if failed:
        say("!!! RESULTS DIFFER FROM THE SIMRD REFERENCE (see MISMATCH lines above)")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as exc:
        sys.exit(f"bench_reference: {exc}")
