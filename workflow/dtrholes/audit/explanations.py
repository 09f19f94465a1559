"""The explanations check: each explained pair as its cited records and its own parts give it."""

from __future__ import annotations

import json

from dtrholes import explain
from dtrholes.audit.context import Check, Context, Failure
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
            problems = [_cited_problem(ctx, pair, run, listed) for run in ("ok", "fail")]
            for problem in [*problems, mechanism_problem(pair)]:
                if problem:
                    failures.append(Failure("explanations", f"{where}: pair {i}", problem))
    return Check("explanations", count, tuple(failures), (f"{len(found)} files",))


def mechanism_problem(pair: dict) -> str | None:
    """Whether an explanation's mechanism summary is not what its other parts give."""
    try:
        derived = explain.mechanism(pair)
    except (KeyError, TypeError, ValueError) as exc:  # an explanation edited out of shape
        return f"its mechanism summary cannot be derived from its parts ({type(exc).__name__})"
    if pair.get("mechanism") != derived:
        return "its mechanism summary is not what its divergence, cascade and retention give"
    return None


def _cited_problem(ctx: Context, pair: dict, run: str, listed: dict[str, list[str]]) -> str | None:
    run_id = pair["cites"][run]
    record = ctx.inv.records.get(run_id)
    if record is None:
        return f"the {run} run cites {run_id}, which has no record"
    if run_id not in listed:
        return f"the {run} run cites {run_id}, which no current job output lists"
    result = record["result"]
    stated = explain.summary(Result.from_dict(result), pair["peak_memory"]) if result else None
    if record["trace"]["name"] != pair["trace"] or stated != pair[run]:
        return f"the {run} run is not what record {run_id} holds"
    return None
