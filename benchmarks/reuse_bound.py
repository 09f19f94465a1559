"""Upper bound on what resuming from saved state could save when tiling a map.

The run at `hi + 1` replays the run at `hi` identically up to the first fit comparison whose
threshold is `hi + 1`: the comparison that set the certified interval's upper end. This script
finds, for runs of a map (those ending at a change of outcome, and a seeded sample of the
rest), the shortest trace prefix whose replay already certifies the same upper end, and reports
the share of the full run's clock spent before it. A run resumed from a state saved just before
that comparison would skip that share.

    python benchmarks/reuse_bound.py --trace resnet32 --map map.parquet [--sample 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import zipfile

from dtrholes import fetch, maps
from simulator import parse_trace, simulate

GROUP_STARTS = (b'"INSTRUCTION":"CALL"', b'"INSTRUCTION":"CONSTANT"', b'"INSTRUCTION":"MUTATE"')


def prefix_runner(data: bytes, name: str):
    """Trace prefix of k lines -> its replay at a budget (parsed prefixes cached), and the
    prefix lengths that end between instruction groups (cut before an operator or constant)."""
    lines = data.split(b"\n")
    cuts = [i for i, line in enumerate(lines) if any(g in line for g in GROUP_STARTS)]
    cache: dict[int, object] = {}

    def run(k: int, budget: int, policy: str):
        if k not in cache:
            cache[k] = parse_trace(b"\n".join(lines[:k]) + b"\n", f"{name}[:{k}]", name)
        return simulate(cache[k], budget, policy)

    return run, [*cuts, len(lines)]


def divergence(run, cuts: list[int], budget: int, hi: int, policy: str) -> tuple[int, int]:
    """The shortest prefix (an index into `cuts`) whose replay at `budget` certifies the upper
    end `hi`, and the clock of the prefix just shorter than it."""
    low, high = 0, len(cuts) - 1  # invariant: the prefix cuts[high] certifies hi
    while high - low > 1:
        middle = (low + high) // 2
        found = run(cuts[middle], budget, policy).budget_hi
        if found is not None and found <= hi:
            high = middle
        else:
            low = middle
    return cuts[high], run(cuts[low], budget, policy).clock


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--map", required=True, help="a map table of `dtr-holes map`")
    p.add_argument("--sample", type=int, default=20, help="other runs, seeded")
    p.add_argument("--seed", type=int, default=20261129)
    args = p.parse_args()
    m = maps.read(args.map)
    entry = fetch.find_entry(args.trace)
    archive = fetch.fetch_archive(fetch.default_data_dir(), None)
    data = zipfile.ZipFile(archive).read(entry.member)
    run, cuts = prefix_runner(data, args.trace)
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    tiles = [t for t in m.tiles if t.exact and t.budget_hi is not None]
    tiles.sort(key=lambda t: t.first)
    edges = [
        a
        for a, b in zip(tiles, tiles[1:], strict=False)
        if maps.kind_of(a.outcome) != maps.kind_of(b.outcome)
    ]
    rest = [t for t in tiles if t not in edges]
    chosen = edges + random.Random(args.seed).sample(rest, min(args.sample, len(rest)))
    shares = {"edge": [], "sample": []}
    for t in chosen:
        started = time.perf_counter()
        full = simulate(trace, t.run_budget, m.policy)
        k, before = divergence(run, cuts, t.run_budget, t.budget_hi, m.policy)
        share = before / full.clock
        kind = "edge" if t in edges else "sample"
        shares[kind].append(share)
        print(
            f"{kind} run at {t.run_budget:,} (hi {t.budget_hi:,}, {full.outcome}): diverges at line"
            f" {k:,} of {cuts[-1]:,}, {share:.1%} of the clock before it"
            f" ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    for kind, found in shares.items():
        if found:
            print(
                f"{kind}: {len(found)} runs, share of the replay before the divergence: median"
                f" {statistics.median(found):.1%}, mean {statistics.mean(found):.1%},"
                f" min {min(found):.1%}, max {max(found):.1%}"
            )


if __name__ == "__main__":
    main()
