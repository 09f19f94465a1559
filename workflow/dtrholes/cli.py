"""The `dtr-holes` command line: one entry point, one subcommand per task."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from dtrholes import centrality, edges, fetch, holes, plan, records, runner
from dtrholes.records import Request
from simulator import (
    POLICIES,
    Result,
    Trace,
    UserError,
    budget_for,
    get_policy,
    peak_memory,
    simulate,
)


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


def _add_pipeline_steps(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fetch", help="fetch, verify and compile the traces into a data directory")
    p.add_argument("--data", type=Path, required=True, help="data directory")
    p.add_argument("--archive", default=None, help="archive file or URL (default: canonical)")
    _add_sheet(p)
    p.set_defaults(run=_fetch)

    p = sub.add_parser("baseline", help="a trace's peak memory, model compute and checksum")
    p.add_argument("--trace", required=True)
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--out", type=Path, required=True, help="JSON file to write")
    _add_sheet(p)
    p.set_defaults(run=_baseline)

    p = sub.add_parser("sweep", help="run one job of a protocol stage, one record per point")
    p.add_argument("--protocol", type=Path, required=True)
    p.add_argument("--stage", type=str.upper, choices=["A", "C"], required=True)
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--job", type=int, required=True, help="0-based job index")
    p.add_argument("--points-per-job", type=int, required=True)
    p.add_argument("--baseline", type=Path, required=True, help="the trace's baseline JSON")
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--records", type=Path, required=True, help="directory of execution records")
    p.add_argument("--out", type=Path, required=True, help="JSON list of the job's run ids")
    _add_sheet(p)
    p.set_defaults(run=_sweep)

    p = sub.add_parser("edge", help="the exact byte where the outcome changes between budgets")
    p.add_argument("--trace", required=True, help="trace name or .log path")
    p.add_argument("--low", type=float, required=True, help="lower budget ratio")
    p.add_argument("--high", type=float, required=True, help="higher budget ratio")
    p.add_argument("--policy", default="dtr")
    p.add_argument("--cap", type=float, default=None, help="overhead cap")
    p.set_defaults(run=_edge)

    p = sub.add_parser("holes", help="count feasibility holes per trace and policy")
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--out", type=Path, required=True, help="holes table (Parquet)")
    p.add_argument("--markdown", type=Path, required=True, help="holes table (Markdown)")
    p.set_defaults(run=lambda a: print(f"{holes.tabulate(a.records, a.out, a.markdown)} series"))

    p = sub.add_parser("gather", help="tabulate execution records into Parquet")
    p.add_argument("--records", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=lambda a: print(f"{records.gather(a.records, a.out)} records"))


def _edge(args: argparse.Namespace) -> None:
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    peak = peak_memory(trace)

    def run(budget: int) -> Result:
        return simulate(trace, budget, args.policy, overhead_cap=args.cap)

    low, high = budget_for(trace, args.low, peak), budget_for(trace, args.high, peak)
    edge = edges.exact_edge(run, low, high)
    print(
        f"{trace.name} · {args.policy}: {edge.outcome_below} at {edge.below:,} bytes"
        f" ({edge.below / peak:.8f} of peak), {edge.outcome_above} at {edge.below + 1:,};"
        f" {edge.runs} runs"
    )


def _add_sheet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sheet", type=Path, default=fetch.DEFAULT_SHEET, help="the trace sheet")


def _fetch(args: argparse.Namespace) -> None:
    archive = fetch.fetch_archive(args.data, args.archive, sheet=args.sheet)
    for entry in fetch.read_sheet(args.sheet):
        trace = fetch.load_trace(entry.name, args.data, str(archive), sheet=args.sheet)
        print(f"{entry.name}: {trace.n_ops} operators, {fetch.compiled_path(args.data, entry)}")


def _baseline(args: argparse.Namespace) -> None:
    trace = _load_from(args.trace, args.data, args.sheet)
    baseline = {
        "trace": trace.name,
        "sha256": trace.sha256,
        "peak_memory": peak_memory(trace),
        "model_compute": trace.model_compute,
    }
    _write_json(args.out, baseline)


def _sweep(args: argparse.Namespace) -> None:
    protocol = plan.read_protocol(args.protocol)
    baseline = json.loads(args.baseline.read_text(encoding="utf-8"))
    index = [entry.name for entry in fetch.read_sheet(args.sheet)].index(args.trace)
    points = plan.job_points(
        plan.stage_points(protocol, args.stage, args.trace, index), args.points_per_job, args.job
    )
    params = get_policy(args.policy).resolve(protocol["policies"].get(args.policy))
    requests = [
        Request(
            trace=args.trace,
            trace_sha256=baseline["sha256"],
            policy=args.policy,
            params=params,
            budget=budget_for(None, p.ratio, peak=baseline["peak_memory"]),
            ratio=p.ratio,
            overhead_cap=protocol["limits"]["overhead_cap"],
            stage=args.stage,
            repeat=p.repeat,
        )
        for p in points
    ]
    load = functools.partial(_load_from, data=args.data, sheet=args.sheet)
    paths = runner.run_requests(requests, load, args.records, protocol["limits"]["wall_clock_s"])
    _write_json(args.out, [path.stem for path in paths])


def _load_from(name: str, data: Path, sheet: Path) -> Trace:
    return fetch.load_trace(name, data, str(data / fetch.ARCHIVE_NAME), sheet=sheet)


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dtr-holes", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    _add_simulate(sub)
    _add_pipeline_steps(sub)
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
