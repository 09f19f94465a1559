"""The `dtr-holes` command line: one entry point, one subcommand per task."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pyarrow as pa

from dtrholes import (
    audit,
    centrality,
    compare,
    crosscheck,
    edges,
    explain,
    fetch,
    files,
    holes,
    layout,
    maps,
    maptables,
    paper,
    plan,
    processes,
    protocol,
    records,
    stages,
)
from dtrholes.records import Request
from simulator import (
    POLICIES,
    Replayer,
    Result,
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
    central = centrality.for_policy(trace, args.policy, params)
    result = simulate(trace, budget, args.policy, params, overhead_cap=args.cap, centrality=central)
    print(json.dumps(result.to_dict(), sort_keys=True) if args.json else _describe(result))


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="why a budget fails where another completes")
    p.add_argument("--trace", required=True, help="trace name or .log path")
    for run, what in (("ok", "completing"), ("fail", "failing")):
        size = p.add_mutually_exclusive_group(required=True)
        size.add_argument(f"--{run}", type=float, help=f"the {what} budget, a ratio of peak")
        size.add_argument(f"--{run}-budget", type=int, help=f"the {what} budget in bytes")
    p.add_argument("--policy", default="dtr", help="one of: " + ", ".join(POLICIES))
    p.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a policy parameter (repeatable)",
    )
    p.add_argument("--cap", type=float, default=None, help="overhead cap")
    p.add_argument("--window", type=_window, help="FIRST:LAST steps the probe lists")
    p.add_argument("--top", type=_count, default=explain.TOP, help="candidates per decision")
    p.add_argument(
        "--decisions", type=_count, help="at most N decisions per run (first and last halves)"
    )
    p.add_argument("--out", type=_out_dir, help="directory for explain.json, .md and the figures")
    p.set_defaults(run=_explain)


def _out_file(text: str) -> Path:
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"expected a file path, found the directory {text!r}")
    return Path(text)


def _out_dir(text: str) -> Path:
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"expected a directory, found the file {text!r}")
    return Path(text)


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
    central = centrality.for_policy(trace, args.policy, dict(params))
    pair = explain.Pair(trace, args.policy, ok, fail, params, args.cap, peak, central)
    found = explain.explain(pair, args.window, args.top, args.decisions)
    if args.out is None:
        print(explain.markdown(found), end="")
    else:
        _write_explanations([found], args.out, (".png", ".pdf"))
        print(f"wrote {args.out}/explain.json, explain.md, pair-0.png, pair-0.pdf")


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


def _add_map(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map", help="tile a budget range with certified intervals (exact map)")
    p.add_argument("--trace", required=True, help="trace name or .log path")
    p.add_argument("--policy", default="dtr", help="one of: " + ", ".join(POLICIES))
    p.add_argument("--from", dest="low", type=float, required=True, help="lowest budget ratio")
    p.add_argument("--to", dest="high", type=float, required=True, help="highest budget ratio")
    p.add_argument("--chunks", type=_positive, default=1, help="independent chunks of the range")
    p.add_argument("--max-runs", type=_positive, default=100_000, help="run cap per chunk")
    p.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a policy parameter (repeatable)",
    )
    p.add_argument("--cap", type=float, default=None, help="overhead cap")
    p.add_argument("--out", type=_out_file, required=True, help="intervals table (Parquet)")
    p.set_defaults(run=_map)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, found {text!r}")
    return int(text)


def _map(args: argparse.Namespace) -> None:
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    peak, params = peak_memory(trace), dict(args.param)
    span = maps.Span(budget_for(trace, args.low, peak), budget_for(trace, args.high, peak))
    if span.last < span.first:
        raise UserError("--from/--to", "--from no higher than --to", f"{args.low} > {args.high}")
    policy = get_policy(args.policy)
    central = centrality.for_policy(trace, args.policy, params)
    resolved = policy.resolve(params)
    replayer = Replayer(trace, policy.name, params, args.cap, central)

    def run(budget: int) -> tuple[Result, str]:
        request = Request(trace.name, trace.sha256, policy.name, resolved, budget, None, args.cap)
        return replayer.simulate(budget), request.run_id

    tiles = (
        tile
        for i, chunk in enumerate(maps.split(span, args.chunks))
        for tile in maps.tile(run, chunk, args.max_runs, i, _progress(i, chunk))
    )
    m = maps.Map(trace.name, policy.name, peak, (span,), tuple(tiles))
    maps.write(m, args.out)
    summary = maps.summarise(m)
    print(f"{trace.name} · {policy.name}: {summary.runs:,} runs, {maptables.verdict(m, summary)}")
    for hole in summary.holes[:20]:
        print(
            f"  fails {hole.first:,}..{hole.last:,} bytes ({hole.first / peak:.6f}–"
            f"{hole.last / peak:.6f}), {hole.width:,} bytes{'' if hole.exact else ', open'}"
        )


def _progress(chunk: int, span: maps.Span):
    """Prints every 100th run's count and the share of the chunk covered so far."""
    width = span.last - span.first + 1

    def show(runs: int, covered: int) -> None:
        if runs % 100 == 0 or covered == width:
            print(f"chunk {chunk}: {runs:,} runs, {covered / width:.1%} covered", file=sys.stderr)

    return show


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

    p = sub.add_parser("rank", help="a trace's storage betweenness, cached for the policies")
    p.add_argument("--trace", required=True)
    p.add_argument("--seed", type=int, required=True, help="the ranking policy's seed")
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    _add_sheet(p)
    p.set_defaults(run=_rank)

    p = sub.add_parser("sweep", help="run one job of a sampling stage, one record per point")
    p.add_argument("--stage", type=str.upper, required=True, help="A, B, C or a point stage")
    p.add_argument(
        "--points", type=plan.parse_points, required=True, help="RATIO:REPEAT, comma-separated"
    )
    _add_job(p)
    p.set_defaults(run=_sweep)

    p = sub.add_parser("refine", help="plan Stage B: the intervals its triggers select")
    p.add_argument("--trace", required=True)
    p.add_argument("--spec", type=json.loads, required=True, help="the job's protocol values")
    p.add_argument("--jobs", type=Path, nargs="*", default=[], help="Stage A and C outputs")
    p.add_argument("--study", type=Path, help="the study's evidence table (its Stage B runs)")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_refine)

    for name, what in (("edges", "exact byte edges"), ("repeat", "fresh-process repeats")):
        p = sub.add_parser(name, help=f"{what} of one trace × policy's sampled series")
        p.add_argument("--jobs", type=Path, nargs="+", required=True, help="sampling outputs")
        _add_job(p)
        p.set_defaults(run=_edges if name == "edges" else _repeat)

    p = sub.add_parser("explain-regions", help="explain every confirmed region's edge brackets")
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="sampling outputs")
    p.add_argument("--repeats", type=Path, required=True, help="the repeat job's output")
    _add_job(p)
    p.set_defaults(run=_explain_regions)

    p = sub.add_parser("edge", help="the exact byte where feasibility changes between budgets")
    p.add_argument("--trace", required=True, help="trace name or .log path")
    p.add_argument("--low", type=float, required=True, help="lower budget ratio")
    p.add_argument("--high", type=float, required=True, help="higher budget ratio")
    p.add_argument("--policy", default="dtr", help="one of: " + ", ".join(POLICIES))
    p.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a policy parameter (repeatable)",
    )
    p.add_argument("--cap", type=float, default=None, help="overhead cap")
    p.set_defaults(run=_edge)

    p = sub.add_parser("gather", help="tabulate the records that job outputs list into Parquet")
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="job outputs")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_gather)

    p = sub.add_parser("holes", help="count feasibility holes per trace and policy")
    _add_table(p, "holes")
    p.add_argument("--edges", type=Path, nargs="*", default=[], help="edges job outputs")
    p.add_argument("--repeats", type=Path, nargs="*", default=[], help="repeat job outputs")
    p.set_defaults(run=_holes)

    p = sub.add_parser("compare", help="each policy against DTR: hypotheses H1, H2, H3")
    _add_table(p, "comparison")
    p.set_defaults(run=_compare)

    p = sub.add_parser("paper", help="every published point and cell of the study beside ours")
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--out", type=Path, required=True, help="comparison table (Parquet)")
    p.add_argument("--markdown", type=Path, required=True, help="comparison (Markdown)")
    p.add_argument("--published", type=Path, required=True, help="the study's published data")
    p.add_argument("--crosscheck", type=Path, required=True, help="the cross-check table")
    p.set_defaults(run=_paper)

    p = sub.add_parser("crosscheck", help="replay region points with unmodified simrd")
    _add_table(p, "cross-check")
    p.add_argument("--repeats", type=Path, nargs="*", default=[], help="repeat job outputs")
    p.add_argument("--baselines", type=Path, nargs="+", required=True, help="baseline JSONs")
    p.add_argument("--simrd", default=None, help="simrd checkout or archive (none: not run)")
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    _add_sheet(p)
    p.set_defaults(run=_crosscheck)

    p = sub.add_parser("figures", help="a trace's cliff and overhead figures (PNG, PDF)")
    p.add_argument("--trace", required=True)
    _add_figure_inputs(p, "the trace's baseline JSON")
    p.set_defaults(run=_figures)

    p = sub.add_parser("zoom", help="a trace × policy's hole regions: grid (PNG, PDF), table")
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", required=True)
    _add_figure_inputs(p, "the trace's baseline JSON")
    p.set_defaults(run=_zoom)

    p = sub.add_parser("figure1", help="the study's Figure 1 under DTR (PNG, PDF)")
    _add_figure_inputs(p, "a baseline JSON per trace drawn", many=True)
    p.set_defaults(run=_figure1)

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
        default=Path(layout.baselines()),
        help="points: the pipeline's baselines (peaks); a trace without one is replayed",
    )
    p.set_defaults(run=_protocol)


def _add_map_steps(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map-plan", help="the byte ranges each policy's map covers on a trace")
    p.add_argument("--trace", required=True)
    p.add_argument("--spec", type=json.loads, required=True, help="the job's protocol values")
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="sampling outputs")
    p.add_argument("--baseline", type=Path, required=True, help="the trace's baseline JSON")
    p.add_argument("--whole", action="store_true", help="map the whole protocol range")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_map_plan)

    p = sub.add_parser("map-chunk", help="tile one chunk of a map, one record per run")
    p.add_argument("--first", type=int, required=True, help="first byte of the chunk")
    p.add_argument("--last", type=int, required=True, help="last byte of the chunk")
    p.add_argument("--chunk", type=int, default=0, help="the chunk's index in its range")
    _add_job(p)
    p.set_defaults(run=_map_chunk)

    p = sub.add_parser("map-merge", help="one trace × policy's map chunks as one map")
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--baseline", type=Path, required=True, help="the trace's baseline JSON")
    p.add_argument("--maps", type=Path, nargs="*", default=[], help="chunk maps (Parquet)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_map_merge)

    p = sub.add_parser("map-table", help="holes of exact maps beside the sampled stages")
    p.add_argument("--maps", type=Path, nargs="*", default=[], help="merged maps (Parquet)")
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--out", type=Path, required=True, help="series table (Parquet)")
    p.add_argument("--holes", type=Path, required=True, help="holes table (Parquet)")
    p.add_argument("--markdown", type=Path, required=True)
    p.set_defaults(run=_map_table)

    p = sub.add_parser("map-figure", help="a trace's map strips and hole zooms (PNG, PDF)")
    p.add_argument("--trace", required=True)
    p.add_argument("--maps", type=Path, nargs="*", default=[], help="the trace's merged maps")
    p.add_argument("--out", type=Path, required=True, help="figure path without extension")
    p.set_defaults(run=_map_figure)


def _map_plan(args: argparse.Namespace) -> None:
    listed = stages.listed_records(args.jobs, layout.records(args.results))
    by_policy: dict[str, list[dict]] = {}
    for record in listed:
        by_policy.setdefault(record["policy"]["name"], []).append(record)
    peak = stages.read_output(args.baseline)["peak_memory"]
    found = stages.map_plan(plan.parameters(args.spec), peak, by_policy, args.whole)
    jobs = [str(p) for p in args.jobs]  # what the plan was made from: a later series is newer
    files.write_json(args.out, {"trace": args.trace, "jobs": jobs, **found})
    for policy, p in found["policies"].items():
        what = "whole range" if p["whole"] else f"{len(p['ranges'])} neighbourhoods"
        print(f"{args.trace} {policy}: {what}, about {p['estimate']:,} runs for the whole range")


def _map_chunk(args: argparse.Namespace) -> None:
    job = _job(args, "map")
    span = maps.Span(args.first, args.last)
    m = stages.map_span(job, span, args.chunk, _progress(args.chunk, span))
    maps.write(m, args.out)
    print(f"{args.trace} {args.policy} chunk {args.chunk}: {m.runs:,} runs")


def _map_merge(args: argparse.Namespace) -> None:
    peak = stages.read_output(args.baseline)["peak_memory"]
    empty = maps.Map(args.trace, args.policy, peak, (), (), {})
    merged = maps.merge([empty, *(maps.read(p) for p in args.maps)], str(args.out))
    maps.write(merged, args.out)
    print(f"{merged.trace} {merged.policy}: {merged.runs:,} runs, {len(merged.tiles):,} tiles")


def _map_table(args: argparse.Namespace) -> None:
    found = [maps.read(p) for p in args.maps]
    series, found_holes = maptables.tabulate(found, holes.read_rows(args.records))
    maptables.write(series, found_holes, args.out, args.holes, args.markdown)
    print("\n".join(maptables.verdicts(series)))


def _map_figure(args: argparse.Namespace) -> None:
    from dtrholes import figures  # plotting libraries load only for commands that plot

    figures.save(figures.map_strips([maps.read(p) for p in args.maps], args.trace), args.out)


def _add_table(p: argparse.ArgumentParser, what: str) -> None:
    """The arguments of a table command: what it reads and the two files it writes."""
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--protocol", type=Path, required=True, help="the rendered protocol (JSON)")
    p.add_argument("--out", type=Path, required=True, help=f"{what} table (Parquet)")
    p.add_argument("--markdown", type=Path, required=True, help=f"{what} table (Markdown)")


def _add_audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="check that every claim in the results is backed by records")
    p.add_argument(
        "results", nargs="?", type=Path, default=Path(layout.RESULTS), help="results dir"
    )
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
    p.add_argument("--workers", type=_positive, default=1, help="processes rerunning records")
    p.add_argument("--markdown", type=Path, help="report (default: RESULTS/audit/audit.md)")
    p.add_argument("--json", type=Path, help="report (default: RESULTS/audit/audit.json)")
    p.add_argument("--evidence", type=Path, help="table (default: RESULTS/evidence.csv)")
    _add_sheet(p)
    p.set_defaults(run=_audit)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, found {text!r}")
    return int(text)


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
        args.markdown or layout.audit_report("md", args.results),
        args.json or layout.audit_report("json", args.results),
        args.evidence or layout.evidence_table(args.results),
    )
    print(f"audit {'passed' if report.passed else 'FAILED'} in {report.seconds:.1f} s")
    return 0 if report.passed else 1


def _rank(args: argparse.Namespace) -> None:
    trace = stages.load_trace(args.trace, args.data, args.sheet)
    centrality.load_betweenness(trace, args.seed, args.results)
    print(centrality.cache_path(args.results, trace.name, trace.sha256, args.seed))


def _add_job(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--spec", type=json.loads, required=True, help="the job's protocol values")
    p.add_argument("--protocol", type=Path, required=True, help="protocol directory")
    p.add_argument("--baseline", type=Path, required=True, help="the trace's baseline JSON")
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True, help="JSON output listing the run ids")
    _add_sheet(p)


def _job(args: argparse.Namespace, kind: str) -> stages.Job:
    """The job an invocation describes; its protocol values must be the current protocol's."""
    current = protocol.load(args.protocol)
    if plan.job_spec(current, kind, args.policy) != args.spec:
        raise UserError("--spec", f"the current protocol's values for a {kind} job", "others")
    baseline = json.loads(args.baseline.read_text(encoding="utf-8"))
    return stages.Job(
        args.trace,
        args.policy,
        args.spec,
        current.version,
        baseline,
        args.data,
        args.sheet,
        args.results,
    )


def _edge(args: argparse.Namespace) -> None:
    if args.low >= args.high:
        raise UserError("--low, --high", "--low below --high", f"{args.low} and {args.high}")
    trace = fetch.load_trace(args.trace, fetch.default_data_dir())
    peak, params = peak_memory(trace), dict(args.param)
    central = centrality.for_policy(trace, args.policy, params)

    def run(budget: int, cap: float | None = None) -> Result:
        cap = args.cap if cap is None else cap
        return simulate(trace, budget, args.policy, params, cap, central)

    low, high = (run(budget_for(trace, r, peak)) for r in (args.low, args.high))
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
    trace = stages.load_trace(args.trace, args.data, args.sheet)
    baseline = {
        "trace": trace.name,
        "sha256": trace.sha256,
        "peak_memory": peak_memory(trace),
        "model_compute": trace.model_compute,
    }
    files.write_json(args.out, baseline)


def _sweep(args: argparse.Namespace) -> None:
    known = list(layout.stages(protocol.load(args.protocol).parameters))
    if args.stage not in known:
        raise UserError("--stage", f"one of the protocol's stages {known}", args.stage)
    job = _job(args, args.stage)
    run_ids = stages.sweep(job, args.stage, args.points)
    files.write_json(args.out, stages.listing(run_ids, job.records))


def _refine(args: argparse.Namespace) -> None:
    listed = stages.listed_records(args.jobs, layout.records(args.results))
    params = plan.parameters(args.spec)
    study = plan.study_refined(args.study, args.trace) if args.study else []
    intervals = plan.refine_intervals(params, stages.refinement_samples(listed), study)
    files.write_json(args.out, {"trace": args.trace, "intervals": intervals})
    print(f"{args.trace}: {len(intervals)} intervals to refine")


def _edges(args: argparse.Namespace) -> None:
    job = _job(args, "edge")
    found, run_ids = stages.find_edges(job, stages.listed_records(args.jobs, job.records))
    files.write_json(args.out, {"edges": found, **stages.listing(run_ids, job.records)})
    print(f"{args.trace} {args.policy}: {len(found)} edges, {len(run_ids)} runs")


def _repeat(args: argparse.Namespace) -> None:
    job = _job(args, "repeat")
    regions, run_ids = stages.repeat_regions(job, stages.listed_records(args.jobs, job.records))
    files.write_json(args.out, {"regions": regions, **stages.listing(run_ids, job.records)})
    for region in regions:
        for point in region["points"]:
            if point["disagree"]:
                print(
                    f"DISAGREEMENT: {args.trace} {args.policy} budget {point['budget']:,}:"
                    f" repeats {point['disagree']} differ from the original run",
                    file=sys.stderr,
                )


def _explain_regions(args: argparse.Namespace) -> None:
    job = _job(args, "explain")
    regions = json.loads(args.repeats.read_text(encoding="utf-8"))["regions"]
    found = stages.explain_regions(job, stages.listed_records(args.jobs, job.records), regions)
    _write_explanations(found, args.out, (".png",))  # their PDFs took a tenth of the job
    print(f"{args.trace} {args.policy}: {len(found)} pairs explained")


def _write_explanations(found: list[dict], out: Path, suffixes: tuple[str, ...]) -> None:
    """explain.json and explain.md in directory `out`, and a figure per pair in each format."""
    from dtrholes import figures  # plotting libraries load only for commands that plot

    out.mkdir(parents=True, exist_ok=True)
    files.write_json(out / "explain.json", found, indent=None)  # ~10 MB: the C encoder, 30x faster
    text = "".join(explain.markdown(x) + "\n" for x in found) or "No confirmed region.\n"
    files.write_text(out / "explain.md", text)
    for i, x in enumerate(found):
        figures.explanation(x, out / f"pair-{i}", suffixes=suffixes)


def _gather(args: argparse.Namespace) -> None:
    listed = stages.listed_records(args.jobs, layout.records(args.results))
    jobs = [os.path.relpath(p, args.results) for p in args.jobs]
    print(f"{records.gather(listed, args.out, jobs)} records")


def _holes(args: argparse.Namespace) -> None:
    evidence = holes.Evidence(
        edges=stages.by_series(args.edges, "edges"),
        repeats=stages.by_series(args.repeats, "regions"),
        protocol_version=stages.read_output(args.protocol)["version"],
    )
    print(f"{holes.tabulate(args.records, evidence, args.out, args.markdown)} series")


def _compare(args: argparse.Namespace) -> None:
    rendered = stages.read_output(args.protocol)
    table = compare.compare(
        holes.read_rows(args.records), compare.roles(rendered), rendered["version"]
    )
    files.write_table(pa.Table.from_pylist(table, schema=compare.SCHEMA), args.out)
    files.write_text(args.markdown, compare.markdown(table, rendered["version"]))
    print(f"{len(table)} comparisons")


def _paper(args: argparse.Namespace) -> None:
    checked = holes.read_rows(args.crosscheck)
    found = paper.reproduce(holes.read_rows(args.records), paper.load(args.published), checked)
    files.write_table(paper.table(found), args.out)
    files.write_text(args.markdown, paper.render_markdown(found))
    print(found.verdict if found.ok else f"ERROR: {found.verdict}")


def _crosscheck(args: argparse.Namespace) -> None:
    rendered = stages.read_output(args.protocol)
    baselines = [stages.read_output(p) for p in args.baselines]
    points = stages.crosscheck_points(
        holes.read_rows(args.records),
        stages.by_series(args.repeats, "regions"),
        crosscheck.policies(rendered),
        {b["trace"]: b["model_compute"] for b in baselines},
        paper.simrd_points(paper.load()),
    )
    work = layout.crosscheck_work(args.results)
    source = crosscheck.locate_simrd(args.simrd, work) if args.simrd else None
    checked = []
    for i, point in enumerate(points, 1):
        log = None
        if source is not None:
            log = crosscheck.trace_log(point["trace"], args.data, None, args.sheet, work / "logs")
        checked.append(crosscheck.check_point(point, source, log, work / "runs"))
        print(f"[{i}/{len(points)}] {point['trace']} {point['budget']:,}: {checked[-1]['status']}")
    table = crosscheck.table_rows(checked)
    files.write_table(pa.Table.from_pylist(table, schema=crosscheck.SCHEMA), args.out)
    files.write_text(args.markdown, crosscheck.markdown(table, args.simrd))


def _add_figure_inputs(p: argparse.ArgumentParser, baseline: str, many: bool = False) -> None:
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--holes", type=Path, required=True, help="holes table (Parquet)")
    more = {"action": "append", "default": []} if many else {"required": True}
    p.add_argument("--baseline", type=Path, help=baseline, **more)
    p.add_argument("--out", type=Path, required=True, help="figures directory")


def _figures(args: argparse.Namespace) -> None:
    from dtrholes import figures  # plotting libraries load only for commands that plot

    peak = stages.read_output(args.baseline)["peak_memory"]
    rows = holes.read_rows(args.records)
    figures.plot_trace(rows, holes.read_rows(args.holes), peak, args.trace, args.out)


def _zoom(args: argparse.Namespace) -> None:
    from dtrholes import figures  # plotting libraries load only for commands that plot

    peak = stages.read_output(args.baseline)["peak_memory"]
    rows, table = holes.read_rows(args.records), holes.read_rows(args.holes)
    figures.plot_zoom(rows, table, peak, args.trace, args.policy, args.out)


def _figure1(args: argparse.Namespace) -> None:
    from dtrholes import figures  # plotting libraries load only for commands that plot

    baselines = [stages.read_output(path) for path in args.baseline]
    peaks = {b["trace"]: b["peak_memory"] for b in baselines}
    timeouts = {
        (p.trace, p.budget)
        for p in paper.load().valid
        if p.status == "timeout" and p.policy == paper.FIGURE1_POLICY
    }
    rows, table = holes.read_rows(args.records), holes.read_rows(args.holes)
    figures.plot_figure1(rows, table, peaks, timeouts, args.out)


def _protocol(args: argparse.Namespace) -> None:
    current = protocol.load(args.protocol)
    if args.action == "show":
        print(protocol.describe(current))
        return
    if args.action == "points":
        _points(args, current.parameters)
        return
    if args.out is None:
        raise UserError("protocol render", "--out FILE", "no --out")
    if args.version not in (None, current.version):
        raise UserError(str(args.protocol), f"protocol version {args.version}", current.version)
    files.write_json(args.out, protocol.render(current))


def _points(args: argparse.Namespace, params: dict) -> None:
    """The planned points of the stages that do not depend on outcomes, as CSV."""
    wanted = {"stage": args.stage, "trace": args.trace, "policy": args.policy}
    known = {
        "stage": list(layout.planned(params)),
        "trace": [t for role in params["traces"].values() for t in role],
        "policy": list(params["policies"]),
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


class _Parser(argparse.ArgumentParser):
    """A bad option is one line naming it (argparse prints the usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dtr-holes", description=__doc__)
    p.add_argument(
        "--exit-with-parent",
        type=int,
        metavar="PID",
        help="stop when process PID, the one that started this one, exits (the workflow's jobs)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    _add_simulate(sub)
    _add_explain(sub)
    _add_map(sub)
    _add_pipeline_steps(sub)
    _add_map_steps(sub)
    _add_audit(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.exit_with_parent is not None:
        processes.exit_with_parent(args.exit_with_parent)
    if isinstance(sys.stdout, io.TextIOWrapper):  # progress reaches a log file line by line
        sys.stdout.reconfigure(line_buffering=True)
    try:
        status = args.run(args) or 0
    except UserError as exc:
        print(f"dtr-holes: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a reader that stopped early, e.g. `head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # a file that cannot be read or written: named, without a traceback
        print(f"dtr-holes: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the records written so far stay; a rerun resumes after them
        print("dtr-holes: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
