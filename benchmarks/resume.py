"""What resuming from saved state saves when tiling a map, measured.

Tiles a ratio range of one trace and policy as `dtr-holes map` does (run at a budget, continue
at the certified interval's upper end + 1), once with `simulate` (every run from the start) and
once with a `Replayer` (each run continuing from the state the run below it saved), alternating
the two `--repeat` times and keeping each one's fastest wall time. Every resumed result is
checked against the plain one; a difference is printed as MISMATCH and the exit status is 1.

    python benchmarks/resume.py --trace resnet32 --from 0.099 --to 0.109
"""

from __future__ import annotations

import argparse
import sys
import time

from dtrholes.traces import fetch
from simulator import Replayer, budget_for, peak_memory, simulate


def tile(run, first: int, last: int) -> list:
    """The results of tiling first..last with `run` (a budget -> Result)."""
    results, budget = [], first
    while budget <= last:
        results.append(run(budget))
        if results[-1].budget_hi is None:
            break
        budget = results[-1].budget_hi + 1
    return results


def tile_resumed(replayer: Replayer, first: int, last: int) -> tuple[list, list[int]]:
    """`tile` with a Replayer; also the command each run started at (0: from the start)."""
    starts = []

    def run(budget: int):
        result = replayer.simulate(budget)
        starts.append(replayer.resumed_at)
        return result

    return tile(run, first, last), starts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", default="dtr")
    p.add_argument("--from", dest="low", type=float, required=True)
    p.add_argument("--to", dest="high", type=float, required=True)
    p.add_argument("--saves", type=int, default=16, help="saved states per replay")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    peak = peak_memory(trace)
    first, last = budget_for(None, args.low, peak), budget_for(None, args.high, peak)
    simulate(trace, first, args.policy)  # compile or load the kernel before timing
    plain_s = resumed_s = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        plain = tile(lambda b: simulate(trace, b, args.policy), first, last)
        plain_s = min(plain_s, time.perf_counter() - started)
        replayer = Replayer(trace, args.policy, saves=args.saves)
        started = time.perf_counter()
        resumed, starts = tile_resumed(replayer, first, last)
        resumed_s = min(resumed_s, time.perf_counter() - started)
    bad = [a.budget for a, b in zip(plain, resumed, strict=True) if a != b]
    for budget in bad:
        print(f"MISMATCH at budget {budget:,}")
    commands = replayer.setup.commands
    skipped = sum(starts) / (len(starts) * commands)
    print(
        f"{args.trace} · {args.policy} · {args.low}–{args.high}: {len(plain):,} runs;"
        f" from the start {plain_s:.3f} s, resumed {resumed_s:.3f} s"
        f" (saves {1 - resumed_s / plain_s:.1%}, ×{plain_s / resumed_s:.2f});"
        f" {sum(s > 0 for s in starts) / len(starts):.0%} of runs resumed,"
        f" skipping {skipped:.1%} of the schedule's commands on average"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
