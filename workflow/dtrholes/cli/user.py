"""The commands for users (simulate, explain, map, edge, protocol, audit, trace-torch, recost),
parsers by handlers."""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import time
from pathlib import Path

from dtrholes import audit
from dtrholes.cli import shared
from dtrholes.core import files, paths
from dtrholes.explain import build, markdown
from dtrholes.holes import edges, map_tables, maps
from dtrholes.pipeline import stages
from dtrholes.study import plan, protocol
from dtrholes.study.parameters import Parameters
from dtrholes.study.records import Request
from dtrholes.traces import betweenness, fetch, pytorch, recost
from simulator import (
    Options,
    Replayer,
    Result,
    UserError,
    budget_for,
    get_policy,
    peak_memory,
    simulate,
)
from simulator.trace import read_trace


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="replay one trace under one budget with one policy")
    p.add_argument(
        "--trace", required=True, help="trace name from config/traces.tsv, or a .log path"
    )
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--ratio", type=float, help="budget as a fraction of the trace's peak memory")
    size.add_argument("--budget", type=int, help="budget in bytes")
    shared.add_policy(p)
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
    central = betweenness.for_policy(trace, args.policy, params)
    result = simulate(trace, budget, Options(args.policy, params, args.cap, central))
    print(json.dumps(result.to_dict(), sort_keys=True) if args.json else _describe(result))


def _describe(r: Result) -> str:
    hi = "unbounded" if r.budget_hi is None else f"{r.budget_hi:,}"
    lines = [
        f"{r.trace} · {r.policy} · budget {r.budget:,} bytes: {r.outcome.upper()}",
        f"  clock {r.clock:,} = 1 + model {r.model_compute:,} + remat {r.remat_compute:,}"
        f" (simrd's clock starts at 1), overhead {r.overhead:.4f}",
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


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="why a budget fails where another completes")
    p.add_argument("--trace", required=True, help="trace name or .log path")
    for run, what in (("ok", "completing"), ("fail", "failing")):
        size = p.add_mutually_exclusive_group(required=True)
        size.add_argument(f"--{run}", type=float, help=f"the {what} budget, a ratio of peak")
        size.add_argument(f"--{run}-budget", type=int, help=f"the {what} budget in bytes")
    shared.add_policy(p)
    p.add_argument("--cap", type=float, default=None, help="overhead cap")
    p.add_argument("--window", type=_window, help="FIRST:LAST steps the probe lists")
    p.add_argument("--top", type=shared.count, default=build.TOP, help="candidates per decision")
    p.add_argument(
        "--decisions", type=shared.count, help="at most N decisions per run (first and last halves)"
    )
    p.add_argument(
        "--out", type=shared.out_dir, help="directory for explain.json, .md and the figures"
    )
    p.set_defaults(run=_explain)


def _window(text: str) -> tuple[int, int]:
    first, sep, last = text.partition(":")
    if not (sep and first.isdigit() and last.isdigit() and int(first) <= int(last)):
        raise argparse.ArgumentTypeError(f"expected FIRST:LAST step indices, found {text!r}")
    return int(first), int(last)


def _explain(args: argparse.Namespace) -> None:
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    peak = peak_memory(trace)
    ok, fail = (
        budget if budget is not None else budget_for(trace, ratio, peak)
        for ratio, budget in ((args.ok, args.ok_budget), (args.fail, args.fail_budget))
    )
    params = get_policy(args.policy).resolve(dict(args.param))
    central = betweenness.for_policy(trace, args.policy, dict(params))
    pair = build.Pair(trace, args.policy, ok, fail, params, args.cap, peak, central)
    found = build.explain(pair, args.window, args.top, args.decisions)
    if args.out is None:
        print(markdown.markdown(found), end="")
    else:
        shared.write_explanations([found], args.out, (".png", ".pdf"))
        print(f"wrote {args.out}/explain.json, explain.md, pair-0.png, pair-0.pdf")


def _add_map(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map", help="tile a budget range with certified intervals (exact map)")
    p.add_argument("--trace", required=True, help="trace name or .log path")
    shared.add_policy(p)
    p.add_argument("--from", dest="low", type=float, required=True, help="lowest budget ratio")
    p.add_argument("--to", dest="high", type=float, required=True, help="highest budget ratio")
    p.add_argument(
        "--chunks", type=shared.positive, default=1, help="independent chunks of the range"
    )
    p.add_argument("--max-runs", type=shared.positive, default=100_000, help="run cap per chunk")
    p.add_argument("--cap", type=float, default=None, help="overhead cap")
    p.add_argument("--out", type=shared.out_file, required=True, help="intervals table (Parquet)")
    p.set_defaults(run=_map)


def _map(args: argparse.Namespace) -> None:
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    peak, params = peak_memory(trace), dict(args.param)
    span = maps.Span(budget_for(trace, args.low, peak), budget_for(trace, args.high, peak))
    if span.last < span.first:
        raise UserError("--from/--to", "--from no higher than --to", f"{args.low} > {args.high}")
    policy = get_policy(args.policy)
    if policy.budget_dependent:
        expected = "a policy whose score reads no budget (budget, shortfall): not mapped"
        raise UserError("--policy", expected, f"{policy.name}, which certifies single budgets")
    central = betweenness.for_policy(trace, args.policy, params)
    resolved = policy.resolve(params)
    replayer = Replayer(trace, Options(policy, params, args.cap, central))
    source = {"policy_source": policy.source, "policy_sha256": policy.source_sha256}

    def run(budget: int) -> tuple[Result, str]:
        asked = (trace.name, trace.sha256, policy.name, resolved, budget, None, args.cap)
        return replayer.simulate(budget), Request(*asked, **source).run_id

    tiles = (
        tile
        for i, chunk in enumerate(maps.split(span, args.chunks))
        for tile in maps.tile(run, chunk, args.max_runs, i, shared.progress(i, chunk))
    )
    m = maps.Map(trace.name, policy.name, peak, (span,), tuple(tiles))
    maps.write(m, args.out)
    summary = maps.summarise(m)
    print(f"{trace.name} · {policy.name}: {summary.runs:,} runs, {map_tables.verdict(m, summary)}")
    for hole in summary.holes[:20]:
        print(
            f"  fails {hole.first:,}..{hole.last:,} bytes ({hole.first / peak:.6f}–"
            f"{hole.last / peak:.6f}), {hole.width:,} bytes{'' if hole.exact else ', open'}"
        )


def _add_edge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("edge", help="the exact byte where feasibility changes between budgets")
    p.add_argument("--trace", required=True, help="trace name or .log path")
    p.add_argument("--low", type=float, required=True, help="lower budget ratio")
    p.add_argument("--high", type=float, required=True, help="higher budget ratio")
    shared.add_policy(p)
    p.add_argument("--cap", type=float, default=None, help="overhead cap")
    p.set_defaults(run=_edge)


def _edge(args: argparse.Namespace) -> None:
    if args.low >= args.high:
        raise UserError("--low, --high", "--low below --high", f"{args.low} and {args.high}")
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    peak, params = peak_memory(trace), dict(args.param)
    central = betweenness.for_policy(trace, args.policy, params)

    def run(budget: int, cap: float | None = None) -> Result:
        cap = args.cap if cap is None else cap
        return simulate(trace, budget, Options(args.policy, params, cap, central))

    low, high = (run(budget_for(trace, r, peak)) for r in (args.low, args.high))
    edge = edges.exact_edge(run, low, high)
    print(
        f"{trace.name} · {args.policy}: {edge.outcome_below} at {edge.below:,} bytes"
        f" ({edge.below / peak:.8f} of peak), {edge.outcome_above} at {edge.below + 1:,};"
        f" {edge.runs} runs"
    )


def _add_protocol(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("protocol", help="the effective sweep protocol and its history")
    p.add_argument("action", choices=["show", "render", "points"])
    p.add_argument("--protocol", type=Path, default=Path("protocol"), help="protocol directory")
    p.add_argument("--out", type=Path, help="render: the JSON file to write")
    p.add_argument("--version", help="render: the version id the protocol must have")
    p.add_argument("--stage", type=str.upper, help="points: only this stage")
    p.add_argument("--trace", help="points: only this trace")
    p.add_argument("--policy", help="points: only this policy")
    p.add_argument("--broad", action="store_true", help="points: the broader sweep's")
    p.add_argument(
        "--baselines",
        type=Path,
        default=Path(paths.baselines()),
        help="points: the pipeline's baselines (peaks); a trace without one is replayed",
    )
    p.set_defaults(run=_protocol)


def _protocol(args: argparse.Namespace) -> None:
    current = protocol.load(args.protocol)
    if args.action == "show":
        print(protocol.describe(current))
        return
    if args.action == "points":
        _points(args, current.params)
        return
    if args.out is None:
        raise UserError("protocol render", "--out FILE", "no --out")
    if args.version not in (None, current.version):
        raise UserError(str(args.protocol), f"protocol version {args.version}", current.version)
    files.write_json(args.out, protocol.render(current))


def _points(args: argparse.Namespace, params: Parameters) -> None:
    """The planned points of the stages that do not depend on outcomes, as CSV."""
    wanted = {"stage": args.stage, "trace": args.trace, "policy": args.policy}
    known = {
        "stage": list(paths.planned(params.points)),
        "trace": list(params.traces.every),
        "policy": list(params.policies),
    }
    for key, value in wanted.items():
        if value is not None and value not in known[key]:
            raise UserError(f"--{key}", f"one of {known[key]}", value)
    planned = [
        (stage, trace, policy, point)
        for stage, trace, policy, point in plan.planned_points(params, args.broad)
        if all(v in (None, x) for v, x in zip(wanted.values(), (stage, trace, policy), strict=True))
    ]
    peaks: dict[str, int] = {}
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["stage", "trace", "policy", "ratio", "budget", "repeat"])
    for stage, trace, policy, point in planned:
        if trace not in peaks:
            peaks[trace] = _peak(trace, args.baselines)
        budget = budget_for(None, point.ratio, peak=peaks[trace])
        writer.writerow([stage, trace, policy, repr(point.ratio), budget, point.repeat])


def _peak(trace: str, baselines: Path) -> int:
    """A trace's peak memory: the pipeline's baseline if there is one, else a replay."""
    path = baselines / f"{trace}.json"
    if path.is_file():
        return stages.read_output(path)["peak_memory"]
    return peak_memory(fetch.load_trace(trace, fetch.default_data_dir()))


def _add_audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="check that every claim in the results is backed by records")
    p.add_argument("results", nargs="?", type=Path, default=Path(paths.RESULTS), help="results dir")
    p.add_argument("--data", type=Path, default=None, help="data directory with the archive")
    p.add_argument(
        "--protocol", type=Path, default=None, help="rendered protocol (default: the latest)"
    )
    p.add_argument(
        "--sample",
        type=_sample,
        default=20,
        help="records to rerun besides edge points, or 'all' to rerun every record",
    )
    p.add_argument("--seed", type=int, default=audit.SEED, help="seed of the rerun sample")
    p.add_argument("--workers", type=shared.positive, default=1, help="processes rerunning records")
    p.add_argument("--markdown", type=Path, help="report (default: RESULTS/audit/audit.md)")
    p.add_argument("--json", type=Path, help="report (default: RESULTS/audit/audit.json)")
    p.add_argument("--evidence", type=Path, help="table (default: RESULTS/evidence.csv)")
    shared.add_sheet(p)
    p.set_defaults(run=_audit)


def _sample(text: str) -> int | None:
    """A count of records, or None for `all` of them."""
    if text == "all":
        return None
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 or all, found {text!r}")
    return int(text)


def _audit(args: argparse.Namespace) -> int:
    if not args.results.is_dir():
        raise UserError(str(args.results), "a results directory", "no such directory")
    options = audit.Options(
        args.results,
        args.data or fetch.default_data_dir(),
        args.sheet,
        args.protocol,
        args.sample,
        args.seed,
        args.workers,
    )
    report = audit.run(options, time.perf_counter, print)
    audit.write(
        report,
        args.markdown or paths.audit_report("md", args.results),
        args.json or paths.audit_report("json", args.results),
        args.evidence or paths.evidence_table(args.results),
    )
    print(f"audit {'passed' if report.passed else 'FAILED'} in {report.seconds:.1f} s")
    return 0 if report.passed else 1


def _add_trace_torch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace-torch",
        help="record one training step of a PyTorch model as a trace (the optional torch extra)",
    )
    p.add_argument(
        "--factory",
        required=True,
        help="module:function or file.py:function returning (model, inputs) or "
        "(model, inputs, loss of the output)",
    )
    p.add_argument("--out", type=shared.out_file, required=True, help="the trace (.log) to write")
    p.add_argument(
        "--cost",
        choices=pytorch.COST_MODELS,
        default="flops",
        help="operator costs: measured CPU time, FLOPs plus a floor, or a GPU roofline",
    )
    p.add_argument("--repeats", type=shared.positive, default=5, help="measured: runs per call")
    p.add_argument(
        "--flops-per-ns", type=shared.positive_number, default=10.0, help="flops: throughput"
    )
    p.add_argument("--floor-ns", type=shared.count, default=1000, help="flops: cost per call")
    p.add_argument("--gpu", choices=sorted(pytorch.GPUS), default="v100", help="roofline")
    p.add_argument(
        "--fake",
        action="store_true",
        help="shapes only (FakeTensorMode): no memory, no arithmetic; not with measured costs",
    )
    p.add_argument("--optimizer", choices=pytorch.OPTIMIZERS, default="none")
    p.add_argument("--seed", type=shared.count, default=0, help="torch.manual_seed before all")
    p.set_defaults(run=_trace_torch)


def _trace_torch(args: argparse.Namespace) -> None:
    costs = pytorch.CostModel(args.cost, args.repeats, args.flops_per_ns, args.floor_ns, args.gpu)
    text = pytorch.trace_step(
        args.factory, costs, fake=args.fake, optimizer=args.optimizer, seed=args.seed
    )
    files.write_text(args.out, text)
    trace = read_trace(args.out)
    print(
        f"{args.out}: {trace.n_ops:,} operators, peak memory {peak_memory(trace):,} bytes, "
        f"sha256 {trace.sha256}"
    )


def _add_recost(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recost", help="a trace with perturbed operator costs (cost-noise study)")
    p.add_argument("--trace", required=True, help="trace name from the trace sheet, or a .log path")
    p.add_argument(
        "--recipe",
        required=True,
        type=shared.recipe,
        help="lognormal:<sigma>:<seed> (each cost times exp(sigma z)), uniform (every operator "
        "the mean cost) or size (each operator the bytes it allocates)",
    )
    p.add_argument("--out", type=shared.out_file, required=True, help="the trace (.log) to write")
    p.add_argument("--archive", default=None, help="trace archive file or URL")
    shared.add_sheet(p)
    p.set_defaults(run=_recost)


def _recost(args: argparse.Namespace) -> None:
    if args.trace.endswith(".log"):
        data, label = Path(args.trace).read_bytes(), args.trace
    else:
        entry = fetch.find_entry(args.trace, args.sheet)
        data, label = fetch.trace_bytes(
            entry, fetch.default_data_dir(), args.archive, sheet=args.sheet
        )
    made = recost.recost(data, label, args.recipe)
    files.write_bytes(args.out, made)
    digest = hashlib.sha256(made).hexdigest()
    print(f"{args.out}: sha256 {digest}")
    if not args.trace.endswith(".log"):
        row = f"recost:{args.trace}:{args.recipe}\t{digest}\town"
        print(f"as a trace sheet row: <name>\t{row}\t<title>")


def add(sub: argparse._SubParsersAction) -> None:
    """The user commands, in the order `--help` lists them."""
    for command in (
        _add_simulate,
        _add_explain,
        _add_map,
        _add_edge,
        _add_protocol,
        _add_audit,
        _add_trace_torch,
        _add_recost,
    ):
        command(sub)
