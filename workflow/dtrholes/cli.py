"""The `dtr-holes` command line: one entry point, one subcommand per task."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from dtrholes import centrality, fetch
from simulator import POLICIES, Result, UserError, budget_for, get_policy, simulate


def _param(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, found {text!r}") from None


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="replay one trace under one budget with one policy")
    p.add_argument(
        "--trace", required=True, help="trace name from config/traces.tsv, or a .log path"
    )
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--ratio", type=float, help="budget as a fraction of the trace's peak memory")
    size.add_argument("--budget", type=int, help="budget in bytes")
    p.add_argument("--policy", default="dtr", help="one of: " + ", ".join(POLICIES))
    p.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a policy parameter (repeatable)",
    )
    p.add_argument(
        "--cap",
        type=float,
        default=None,
        help="overhead cap: stop as 'thrashed' past this multiple of model compute",
    )
    p.add_argument(
        "--archive",
        default=None,
        help=f"trace archive file or URL (default: ${fetch.ARCHIVE_ENV} or the canonical URL)",
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(run=_simulate)


def _simulate(args: argparse.Namespace) -> None:
    trace = fetch.load_trace(args.trace, fetch.default_data_dir(), args.archive)
    budget = args.budget if args.budget is not None else budget_for(trace, args.ratio)
    params = dict(args.param)
    policy = get_policy(args.policy)
    central = None
    if policy.centrality:
        seed = dict(policy.resolve(params))["seed"]
        central = centrality.load_betweenness(trace, int(seed))
    result = simulate(trace, budget, policy.name, params, overhead_cap=args.cap, centrality=central)
    print(json.dumps(result.to_dict(), sort_keys=True) if args.json else _describe(result))


def _describe(r: Result) -> str:
    hi = "unbounded" if r.budget_hi is None else f"{r.budget_hi:,}"
    lines = [
        f"{r.trace} · {r.policy} · budget {r.budget:,} bytes: {r.outcome.upper()}",
        f"  clock {r.clock:,}  (model {r.model_compute:,} + remat {r.remat_compute:,}),"
        f" overhead {r.overhead:.4f}",
        f"  evictions {r.evictions:,}, eager frees {r.eager_frees:,},"
        f" rematerializations {r.rematerializations:,},"
        f" heuristic evaluations {r.heuristic_evals:,}",
        f"  peak memory {r.peak_memory:,}; peak pinned {r.peak_pinned:,} at depth"
        f" {r.peak_pinned_depth}; deepest nesting {r.max_depth}",
        f"  same execution for every budget in [{r.budget_lo:,}, {hi}]",
        f"  eviction sequence sha256 {r.eviction_seq_sha256}",
    ]
    if r.failure:
        f = r.failure
        lines.append(
            f"  failed at operator {f.op}: request {f.request:,} bytes, pinned {f.pinned:,},"
            f" depth {f.depth}, over budget by {f.over_budget:,}"
        )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dtr-holes", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    _add_simulate(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except UserError as exc:
        print(f"dtr-holes: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a reader that stopped early, e.g. `head`
        sys.stderr.close()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
