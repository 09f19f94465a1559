"""Policy comparison against DTR per trace: the study's hypotheses H1, H2 and H3."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from dtrholes.core import paths, samples
from dtrholes.core.samples import Sample
from dtrholes.holes import sampled_holes
from dtrholes.study.parameters import Parameters
from simulator.result import OK, THRASHED, TIMEOUT

REFERENCE = "dtr"
H2_LIMIT = 1.05  # the geometric mean overhead ratio policy / DTR that H2 allows


@dataclass(frozen=True)
class Verdict:
    """One hypothesis on one trace × policy: holds, fails, unresolved or n/a, and its numbers."""

    verdict: str
    policy_value: float | None
    dtr_value: float | None


def _series(rows: list[dict], timeouts_fail: bool) -> list[Sample]:
    def outcome(row: dict) -> str:
        found = samples.outcome_of(row)
        return THRASHED if found == TIMEOUT and timeouts_fail else found

    return [Sample(budget=r["budget"], ratio=r["ratio"], outcome=outcome(r)) for r in rows]


def _both_ways(rows: list[dict], dtr: list[dict], measure, holds) -> Verdict:
    """A verdict that is unresolved when counting timeouts as failures would flip it."""

    def measured(timeouts_fail: bool) -> tuple:
        return tuple(
            measure(sampled_holes.summarise(_series(r, timeouts_fail))) for r in (rows, dtr)
        )

    plain, strict = measured(False), measured(True)
    if None in plain:
        return Verdict("n/a", *plain)
    verdict = holds(*plain)
    if None in strict or holds(*strict) != verdict:
        return Verdict("unresolved", *plain)
    return Verdict("holds" if verdict else "fails", *plain)


def h1(rows: list[dict], dtr: list[dict]) -> Verdict:
    """H1: no more failing budgets above first success than DTR."""
    return _both_ways(rows, dtr, lambda s: len(s.failing_above), lambda a, b: a <= b)


def h3(rows: list[dict], dtr: list[dict]) -> Verdict:
    """H3: stable from a budget no higher than DTR's."""
    return _both_ways(rows, dtr, lambda s: s.stable_from, lambda a, b: a <= b)


def h2(rows: list[dict], dtr: list[dict]) -> dict:
    """H2: geometric mean of the per-budget overhead ratio policy / DTR over budgets where both
    complete is at most 1.05; with the number of budgets and the worst ratio."""
    mine = {r["budget"]: r["overhead"] for r in rows if r["outcome"] == OK}
    theirs = {r["budget"]: r["overhead"] for r in dtr if r["outcome"] == OK}
    means = geomean([mine[b] / theirs[b] for b in sorted(mine.keys() & theirs.keys())])
    if means is None:
        return {"h2": "n/a", "h2_geomean": None, "h2_budgets": 0, "h2_worst": None}
    return {
        "h2": "holds" if means[0] <= H2_LIMIT else "fails",
        "h2_geomean": means[0],
        "h2_budgets": means[1],
        "h2_worst": means[2],
    }


def geomean(ratios: list[float]) -> tuple[float, int, float] | None:
    """The geometric mean of overhead ratios, their number and the worst (None if none)."""
    if not ratios:
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)), len(ratios), max(ratios)


def roles(rendered: dict) -> dict[str, str]:
    """Each trace's role (development, confirmatory) in a rendered protocol."""
    return Parameters.from_dict(rendered["parameters"]).traces.roles()


def compare(rows: list[dict], roles: dict[str, str], version: str) -> list[dict]:
    """One comparison row per trace × policy other than DTR, from the sampled records, labelled
    with the protocol versions they ran under (`version`: the current one). DTR is read on the
    stages the policy ran (a baseline's Stage A grid, as the study compared them)."""
    series: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        if row["stage"] in paths.SAMPLED:
            series[row["trace"], row["policy"]].append(row)
    table = []
    for (trace, policy), found in sorted(series.items()):
        if policy == REFERENCE or (trace, REFERENCE) not in series:
            continue
        stages = {r["stage"] for r in found}
        mine = _by_budget(found)
        theirs = _by_budget(r for r in series[trace, REFERENCE] if r["stage"] in stages)
        first, third = h1(mine, theirs), h3(mine, theirs)
        table.append(
            {
                "trace": trace,
                "role": roles.get(trace, ""),
                "policy": policy,
                "h1": first.verdict,
                "h1_failing_above": first.policy_value,
                "h1_dtr_failing_above": first.dtr_value,
                **h2(mine, theirs),
                "h3": third.verdict,
                "h3_stable_from": third.policy_value,
                "h3_dtr_stable_from": third.dtr_value,
                **sampled_holes.protocol_labels(mine + theirs, version),
            }
        )
    return table


def _by_budget(rows: Iterable[dict]) -> list[dict]:
    """One row per budget, the first."""
    found: dict[int, dict] = {}
    for row in rows:
        found.setdefault(row["budget"], row)
    return list(found.values())


SCHEMA = pa.schema(
    [
        ("trace", pa.string()),
        ("role", pa.string()),
        ("policy", pa.string()),
        ("h1", pa.string()),
        ("h1_failing_above", pa.int64()),
        ("h1_dtr_failing_above", pa.int64()),
        ("h2", pa.string()),
        ("h2_geomean", pa.float64()),
        ("h2_budgets", pa.int64()),
        ("h2_worst", pa.float64()),
        ("h3", pa.string()),
        ("h3_stable_from", pa.int64()),
        ("h3_dtr_stable_from", pa.int64()),
        *sampled_holes.LABEL_FIELDS,
    ]
)


def markdown(table: list[dict], version: str) -> str:
    lines = [
        f"Policies against DTR (protocol version {version}). H1: no more failing budgets above "
        "first success; H2: geometric-mean overhead ratio over budgets where both complete "
        f"≤ {H2_LIMIT}; H3: stable from a budget no higher than DTR's. Rows marked † hold runs "
        "recorded under an older protocol version.",
        "",
        "| trace | role | policy | H1 (failing above: policy / DTR) | H2 (geomean, budgets, worst) "
        "| H3 (stable from: policy / DTR) |",
        "|---|---|---|---|---|---|",
    ]
    for r in table:
        h2_numbers = (
            f"{r['h2_geomean']:.3f}, {r['h2_budgets']}, {r['h2_worst']:.3f}"
            if r["h2_budgets"]
            else "no common budget"
        )
        lines.append(
            f"| {r['trace']}{' †' if r['older_protocol'] else ''} | {r['role']} | {r['policy']} "
            f"| {r['h1']} ({r['h1_failing_above']} / {r['h1_dtr_failing_above']}) "
            f"| {r['h2']} ({h2_numbers}) "
            f"| {r['h3']} ({_bytes(r['h3_stable_from'])} / {_bytes(r['h3_dtr_stable_from'])}) |"
        )
    return "\n".join(lines) + "\n"


def _bytes(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"
