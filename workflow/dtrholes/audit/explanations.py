"""The explanations check: each explained pair as its cited records and its own parts give it."""

from __future__ import annotations

import json

from dtrholes.audit.context import Check, Context, Failure
from dtrholes.explain import build, mechanism, types
from simulator import Result


def check_explanations(ctx: Context) -> Check:
    """Every explained pair states its two runs as the records it cites have them, records a
    current job output lists (and so states the sha256 of), and its mechanism summary (budget
    difference and all) as its parts give it."""
    found = sorted((ctx.options.results / "explain").glob("*/*/explain.json"))
    listed = ctx.inv.cited()
    failures, count = [], 0
    for path in found:
        where = str(path.relative_to(ctx.options.results))
        for i, pair in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            count += 1
            try:
                x = types.from_json(pair)
            except types.ExplanationError as exc:
                problems = [f"it is out of shape: {exc}"]
            else:
                cited = [_cited_problem(ctx, x, run, listed) for run in ("ok", "fail")]
                problems = [*cited, mechanism_problem(x)]
            failures += [Failure("explanations", f"{where}: pair {i}", p) for p in problems if p]
    return Check("explanations", count, tuple(failures), (f"{len(found)} files",))


def mechanism_problem(x: types.Explanation) -> str | None:
    """Whether an explanation's mechanism summary is not what its other parts give."""
    try:
        derived = mechanism.mechanism(x.ok, x.fail, x.decisive, x.cascade, x.retention)
    except (AttributeError, TypeError, ValueError) as exc:  # parts that do not fit together
        return f"its mechanism summary cannot be derived from its parts ({type(exc).__name__})"
    if x.mechanism != derived:
        return "its mechanism summary is not what its divergence, cascade and retention give"
    return None


def _cited_problem(
    ctx: Context, x: types.Explanation, run: str, listed: dict[str, list[str]]
) -> str | None:
    if x.cites is None:
        return f"the {run} run cites no record"
    run_id = getattr(x.cites, run)
    record = ctx.inv.records.get(run_id)
    if record is None:
        return f"the {run} run cites {run_id}, which has no record"
    if run_id not in listed:
        return f"the {run} run cites {run_id}, which no current job output lists"
    result = record["result"]
    stated = build.summary(Result.from_dict(result), x.peak_memory) if result else None
    if record["trace"]["name"] != x.trace or stated != getattr(x, run):
        return f"the {run} run is not what record {run_id} holds"
    return None
