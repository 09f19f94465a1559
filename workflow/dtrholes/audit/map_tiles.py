"""The maps check: tiles cover their ranges once, match their records, rerun to their outcomes."""

from __future__ import annotations

import dataclasses
import random

from dtrholes.audit.context import Check, Context, Failure, trace_of
from dtrholes.core import paths
from dtrholes.holes import maps
from dtrholes.study import records, runner
from simulator import UserError
from simulator.result import interval_top

MAP_DRAWS = 3  # tiles per map whose random inner budget the audit reruns


def check_maps(ctx: Context) -> Check:
    """Every merged map: its tiling (no gap, no overlap), each run tile against its record,
    and a seeded few random budgets inside random tiles rerun to the tile's outcome."""
    found = sorted(ctx.options.results.glob(paths.MAP_GLOB))
    rng = random.Random(ctx.options.seed)
    failures, count = [], 0
    for path in found:
        where = str(path.relative_to(ctx.options.results))
        try:
            m = maps.read(path)
        except UserError as exc:
            failures.append(Failure("maps", where, str(exc)))
            continue
        count += len(m.tiles)
        failures += [f for t in m.tiles for f in _tile_failures(ctx, where, m, t)]
        exact = [t for t in m.tiles if t.exact]
        for t in rng.sample(exact, min(MAP_DRAWS, len(exact))):
            failures += _redraw(ctx, where, m, t, rng.randint(t.first, t.last))
    return Check("maps", count, tuple(failures), (f"{len(found)} maps",))


def _tile_failures(ctx: Context, where: str, m: maps.Map, t: maps.Tile) -> list[Failure]:
    if t.run_id is None:
        return []
    record = ctx.inv.records.get(t.run_id)
    at = f"{where}: tile {t.first:,}..{t.last:,}"
    if record is None:
        return [Failure("maps", at, f"run {t.run_id} has no record")]
    result = record["result"] or {}
    stated = (record["stage"], record["trace"]["name"], record["policy"]["name"], record["budget"])
    outcome = result.get("outcome", maps.TIMEOUT)
    if stated != (paths.MAP, m.trace, m.policy, t.run_budget) or outcome != t.outcome:
        return [Failure("maps", at, f"record {t.run_id} is another run: {stated}, {outcome}")]
    hi = interval_top(result.get("budget_hi"), unbounded=t.last)
    if t.exact and not (result["budget_lo"] <= t.first and t.last <= hi):
        return [Failure("maps", at, f"outside the certified interval of record {t.run_id}")]
    return []


def _redraw(ctx: Context, where: str, m: maps.Map, t: maps.Tile, budget: int) -> list[Failure]:
    trace = trace_of(ctx, m.trace)
    if isinstance(trace, str) or t.run_id not in ctx.inv.records:
        return []  # reported by the provenance check and the tile's record check
    request = records.request_of(ctx.inv.records[t.run_id])
    request = dataclasses.replace(request, budget=budget)
    result = runner.execute(request, trace, ctx.options.results)
    if (result.outcome, result.overhead) == (t.outcome, t.overhead):
        return []
    message = f"budget {budget:,} reruns to {result.outcome}, the tile says {t.outcome}"
    return [Failure("maps", f"{where}: tile {t.first:,}..{t.last:,}", message)]
