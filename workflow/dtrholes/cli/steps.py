"""The pipeline's steps: one command per kind of job the rules run, each parser by its handler."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pyarrow as pa

from dtrholes.cli import shared
from dtrholes.core import files, paths
from dtrholes.holes import map_tables, maps, noise, sampled_holes
from dtrholes.pipeline import stages
from dtrholes.report import hypotheses
from dtrholes.report.paper import comparison, output, published
from dtrholes.study import plan, protocol, records, simrd
from dtrholes.traces import betweenness, fetch
from simulator import UserError, peak_memory
from simulator.result import TIMEOUT
from simulator.trace import provenance


def _add_fetch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch", description="fetch, verify and compile the traces into a data directory"
    )
    p.add_argument("--data", type=Path, required=True, help="data directory")
    p.add_argument("--archive", default=None, help="archive file or URL (default: canonical)")
    shared.add_sheet(p)
    p.set_defaults(run=_fetch)


def _fetch(args: argparse.Namespace) -> None:
    archive = fetch.fetch_archive(args.data, args.archive, sheet=args.sheet)
    for entry in fetch.read_sheet(args.sheet):
        trace = fetch.load_trace(entry.name, args.data, str(archive), sheet=args.sheet)
        print(f"{entry.name}: {trace.n_ops} operators, {fetch.compiled_path(args.data, entry)}")


def _add_noise_table(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("noise-table", description="the cost-noise study: holes of perturbed traces")
    p.add_argument("--maps", type=Path, nargs="+", required=True, help="merged maps")
    p.add_argument("--out", type=Path, required=True, help="one row per region x perturbation")
    p.add_argument("--markdown", type=Path, required=True)
    p.add_argument("--figure", type=Path, required=True, help="figure path without suffix")
    shared.add_sheet(p)
    p.set_defaults(run=_noise_table)


def _noise_table(args: argparse.Namespace) -> None:
    from dtrholes.report import figures  # plotting libraries load only for commands that plot

    found = {(m.trace, m.policy): m for m in map(maps.read, args.maps)}
    perturbations = noise.perturbations(fetch.read_sheet(args.sheet))
    series = []
    for (trace, policy), original in found.items():
        perturbed = [
            (p, found[p.name, policy])
            for p in perturbations
            if p.base == trace and (p.name, policy) in found
        ]
        if perturbed:
            series.append((original, perturbed))
    if not series:
        raise UserError("--maps", "the map of a trace and of its perturbations", "none")
    rows = [r for original, perturbed in series for r in noise.persistence(original, perturbed)]
    files.write_table(pa.Table.from_pylist(rows), args.out)
    files.write_text(args.markdown, noise.markdown(series, noise.summary(rows)))
    figures.save(figures.noise(series), args.figure)
    print(f"{len(series)} traces, {len(rows)} region x perturbation rows")


def _add_baseline(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baseline", description="a trace's peak memory, model compute and checksum")
    p.add_argument("--trace", required=True)
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--out", type=Path, required=True, help="JSON file to write")
    shared.add_sheet(p)
    p.set_defaults(run=_baseline)


def _baseline(args: argparse.Namespace) -> None:
    trace = stages.load_trace(args.trace, args.data, args.sheet)
    baseline = {
        "trace": trace.name,
        "sha256": trace.sha256,
        "peak_memory": peak_memory(trace),
        "model_compute": trace.model_compute,
    }
    entry = None if args.trace.endswith(".log") else fetch.find_entry(args.trace, args.sheet)
    if entry is not None and entry.role == "own":  # its origin, which its records name
        data, _ = fetch.trace_bytes(entry, args.data, sheet=args.sheet)
        baseline |= {"file": entry.file, "provenance": provenance(data)}
    files.write_json(args.out, baseline)


def _add_rank(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rank", description="a trace's storage betweenness, cached for the policies")
    p.add_argument("--trace", required=True)
    p.add_argument("--seed", type=int, required=True, help="the ranking policy's seed")
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    shared.add_sheet(p)
    p.set_defaults(run=_rank)


def _rank(args: argparse.Namespace) -> None:
    trace = stages.load_trace(args.trace, args.data, args.sheet)
    betweenness.load_betweenness(trace, args.seed, args.results)
    print(betweenness.cache_path(args.results, trace.name, trace.sha256, args.seed))


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", description="run one job of a sampling stage, one record per point")
    p.add_argument("--stage", type=str.upper, required=True, help="A, B, C or a point stage")
    p.add_argument(
        "--points", type=plan.parse_points, required=True, help="RATIO:REPEAT, comma-separated"
    )
    shared.add_job(p)
    p.set_defaults(run=_sweep)


def _sweep(args: argparse.Namespace) -> None:
    known = list(paths.stages(protocol.load(args.protocol).params.points))
    if args.stage not in known:
        raise UserError("--stage", f"one of the protocol's stages {known}", args.stage)
    job = shared.job(args, args.stage)
    run_ids = stages.sweep(job, args.stage, args.points)
    files.write_json(args.out, stages.listing(run_ids, job.records))


def _add_refine(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refine", description="plan Stage B: the intervals its triggers select")
    p.add_argument("--trace", required=True)
    p.add_argument("--spec", type=json.loads, required=True, help="the job's protocol values")
    p.add_argument("--jobs", type=Path, nargs="*", default=[], help="Stage A and C outputs")
    p.add_argument("--study", type=Path, help="the study's evidence table (its Stage B runs)")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_refine)


def _refine(args: argparse.Namespace) -> None:
    listed = stages.listed_records(args.jobs, paths.records(args.results))
    params = plan.parameters(args.spec)
    study = plan.study_refined(args.study, args.trace) if args.study else []
    intervals = plan.refine_intervals(params, stages.refinement_samples(listed), study)
    files.write_json(args.out, {"trace": args.trace, "intervals": intervals})
    print(f"{args.trace}: {len(intervals)} intervals to refine")


def _add_series_step(sub: argparse._SubParsersAction, name: str, what: str, run) -> None:
    """A step that reads one trace × policy's sampled series and runs more."""
    p = sub.add_parser(name, description=f"{what} of one trace × policy's sampled series")
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="sampling outputs")
    shared.add_job(p)
    p.set_defaults(run=run)


def _add_edges(sub: argparse._SubParsersAction) -> None:
    _add_series_step(sub, "edges", "exact byte edges", _edges)


def _edges(args: argparse.Namespace) -> None:
    job = shared.job(args, paths.EDGE)
    found, run_ids = stages.find_edges(job, stages.listed_records(args.jobs, job.records))
    files.write_json(args.out, {"edges": found, **stages.listing(run_ids, job.records)})
    print(f"{args.trace} {args.policy}: {len(found)} edges, {len(run_ids)} runs")


def _add_repeat(sub: argparse._SubParsersAction) -> None:
    _add_series_step(sub, "repeat", "fresh-process repeats", _repeat)


def _repeat(args: argparse.Namespace) -> None:
    job = shared.job(args, paths.REPEAT)
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


def _add_explain_regions(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain-regions", description="explain every confirmed region's edge brackets"
    )
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="sampling outputs")
    p.add_argument("--repeats", type=Path, required=True, help="the repeat job's output")
    shared.add_job(p)
    p.set_defaults(run=_explain_regions)


def _explain_regions(args: argparse.Namespace) -> None:
    job = shared.job(args, paths.EXPLAIN)
    regions = json.loads(args.repeats.read_text(encoding="utf-8"))["regions"]
    found = stages.explain_regions(job, stages.listed_records(args.jobs, job.records), regions)
    shared.write_explanations(found, args.out, (".png",))  # their PDFs took a tenth of the job
    print(f"{args.trace} {args.policy}: {len(found)} pairs explained")


def _add_gather(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gather", description="tabulate the records that job outputs list into Parquet"
    )
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="job outputs")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_gather)


def _gather(args: argparse.Namespace) -> None:
    listed = stages.listed_records(args.jobs, paths.records(args.results))
    jobs = [os.path.relpath(p, args.results) for p in args.jobs]
    print(f"{records.gather(listed, args.out, jobs)} records")


def _add_table(p: argparse.ArgumentParser, what: str) -> None:
    """The arguments of a table command: what it reads and the two files it writes."""
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--protocol", type=Path, required=True, help="the rendered protocol (JSON)")
    p.add_argument("--out", type=Path, required=True, help=f"{what} table (Parquet)")
    p.add_argument("--markdown", type=Path, required=True, help=f"{what} table (Markdown)")


def _add_holes(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("holes", description="count feasibility holes per trace and policy")
    _add_table(p, "holes")
    p.add_argument("--edges", type=Path, nargs="*", default=[], help="edges job outputs")
    p.add_argument("--repeats", type=Path, nargs="*", default=[], help="repeat job outputs")
    p.set_defaults(run=_holes)


def _holes(args: argparse.Namespace) -> None:
    derived = sampled_holes.EdgesAndRepeats(
        edges=stages.by_series(args.edges, "edges"),
        repeats=stages.by_series(args.repeats, "regions"),
        protocol_version=stages.read_output(args.protocol)["version"],
    )
    print(f"{sampled_holes.tabulate(args.records, derived, args.out, args.markdown)} series")


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", description="each policy against DTR: hypotheses H1, H2, H3")
    _add_table(p, "comparison")
    p.set_defaults(run=_compare)


def _compare(args: argparse.Namespace) -> None:
    rendered = stages.read_output(args.protocol)
    table = hypotheses.compare(
        sampled_holes.read_rows(args.records), hypotheses.roles(rendered), rendered["version"]
    )
    files.write_table(pa.Table.from_pylist(table, schema=hypotheses.SCHEMA), args.out)
    files.write_text(args.markdown, hypotheses.markdown(table, rendered["version"]))
    print(f"{len(table)} comparisons")


def _add_paper(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "paper", description="every published point and cell of the study beside ours"
    )
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--out", type=Path, required=True, help="comparison table (Parquet)")
    p.add_argument("--markdown", type=Path, required=True, help="comparison (Markdown)")
    p.add_argument("--published", type=Path, required=True, help="the study's published data")
    p.add_argument("--crosscheck", type=Path, required=True, help="the cross-check table")
    p.set_defaults(run=_paper)


def _paper(args: argparse.Namespace) -> None:
    checked = sampled_holes.read_rows(args.crosscheck)
    found = comparison.reproduce(
        sampled_holes.read_rows(args.records), published.load(args.published), checked
    )
    files.write_table(output.table(found), args.out)
    files.write_text(args.markdown, output.render_markdown(found))
    print(found.verdict if found.ok else f"ERROR: {found.verdict}")


def _add_crosscheck(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("crosscheck", description="replay region points with unmodified simrd")
    _add_table(p, "cross-check")
    p.add_argument("--repeats", type=Path, nargs="*", default=[], help="repeat job outputs")
    p.add_argument("--baselines", type=Path, nargs="+", required=True, help="baseline JSONs")
    p.add_argument("--simrd", default=None, help="simrd checkout or archive (none: not run)")
    p.add_argument("--data", type=Path, required=True, help="data directory with the archive")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    shared.add_sheet(p)
    p.set_defaults(run=_crosscheck)


def _crosscheck(args: argparse.Namespace) -> None:
    rendered = stages.read_output(args.protocol)
    baselines = [stages.read_output(p) for p in args.baselines]
    points = stages.crosscheck_points(
        sampled_holes.read_rows(args.records),
        stages.by_series(args.repeats, "regions"),
        simrd.policies(rendered),
        {b["trace"]: b["model_compute"] for b in baselines},
        published.simrd_points(published.load()),
    )
    work = paths.crosscheck_work(args.results)
    source = simrd.locate_simrd(args.simrd, work) if args.simrd else None
    checked = []
    for i, point in enumerate(points, 1):
        log = None
        if source is not None:
            log = simrd.trace_log(point["trace"], args.data, None, args.sheet, work / "logs")
        checked.append(simrd.check_point(point, source, log, work / "runs"))
        print(f"[{i}/{len(points)}] {point['trace']} {point['budget']:,}: {checked[-1]['status']}")
    table = simrd.table_rows(checked)
    files.write_table(pa.Table.from_pylist(table, schema=simrd.SCHEMA), args.out)
    files.write_text(args.markdown, simrd.markdown(table, args.simrd))


def _add_figure_inputs(p: argparse.ArgumentParser, baseline: str, many: bool = False) -> None:
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--holes", type=Path, required=True, help="holes table (Parquet)")
    more = {"action": "append", "default": []} if many else {"required": True}
    p.add_argument("--baseline", type=Path, help=baseline, **more)
    p.add_argument("--out", type=Path, required=True, help="figures directory")


def _add_figures(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("figures", description="a trace's cliff and overhead figures (PNG, PDF)")
    p.add_argument("--trace", required=True)
    _add_figure_inputs(p, "the trace's baseline JSON")
    p.set_defaults(run=_figures)


def _figures(args: argparse.Namespace) -> None:
    from dtrholes.report import figures  # plotting libraries load only for commands that plot

    peak = stages.read_output(args.baseline)["peak_memory"]
    rows = sampled_holes.read_rows(args.records)
    figures.plot_trace(rows, sampled_holes.read_rows(args.holes), peak, args.trace, args.out)


def _add_zoom(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "zoom", description="a trace × policy's hole regions: grid (PNG, PDF), table"
    )
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", required=True)
    _add_figure_inputs(p, "the trace's baseline JSON")
    p.set_defaults(run=_zoom)


def _zoom(args: argparse.Namespace) -> None:
    from dtrholes.report import figures  # plotting libraries load only for commands that plot

    peak = stages.read_output(args.baseline)["peak_memory"]
    rows, table = sampled_holes.read_rows(args.records), sampled_holes.read_rows(args.holes)
    figures.plot_zoom(rows, table, peak, args.trace, args.policy, args.out)


def _add_figure1(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("figure1", description="the study's Figure 1 under DTR (PNG, PDF)")
    _add_figure_inputs(p, "a baseline JSON per trace drawn", many=True)
    p.set_defaults(run=_figure1)


def _figure1(args: argparse.Namespace) -> None:
    from dtrholes.report import figures  # plotting libraries load only for commands that plot

    baselines = [stages.read_output(path) for path in args.baseline]
    peaks = {b["trace"]: b["peak_memory"] for b in baselines}
    timeouts = {
        (p.trace, p.budget)
        for p in published.load().valid
        if p.status == TIMEOUT and p.policy == published.study_names().figure1_policy
    }
    rows, table = sampled_holes.read_rows(args.records), sampled_holes.read_rows(args.holes)
    figures.plot_figure1(rows, table, peaks, timeouts, args.out)


def _add_map_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "map-plan", description="the byte ranges each policy's map covers on a trace"
    )
    p.add_argument("--trace", required=True)
    p.add_argument("--spec", type=json.loads, required=True, help="the job's protocol values")
    p.add_argument("--jobs", type=Path, nargs="+", required=True, help="sampling outputs")
    p.add_argument("--baseline", type=Path, required=True, help="the trace's baseline JSON")
    p.add_argument("--whole", action="store_true", help="map the whole protocol range")
    p.add_argument("--results", type=Path, required=True, help="results directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_map_plan)


def _map_plan(args: argparse.Namespace) -> None:
    listed = stages.listed_records(args.jobs, paths.records(args.results))
    by_policy: dict[str, list[dict]] = {}
    for record in listed:
        by_policy.setdefault(record["policy"]["name"], []).append(record)
    peak = stages.read_output(args.baseline)["peak_memory"]
    unmapped = frozenset(p for p, found in by_policy.items() if stages.reads_budget(found))
    found = stages.map_plan(plan.parameters(args.spec), peak, by_policy, args.whole, unmapped)
    jobs = [str(p) for p in args.jobs]  # what the plan was made from: a later series is newer
    files.write_json(args.out, {"trace": args.trace, "jobs": jobs, **found})
    for policy, p in found["policies"].items():
        what = "whole range" if p["whole"] else f"{len(p['ranges'])} neighbourhoods"
        if p.get("reads_budget"):
            what = "not mapped (its score reads the budget)"
        print(f"{args.trace} {policy}: {what}, about {p['estimate']:,} runs for the whole range")


def _add_map_chunk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map-chunk", description="tile one chunk of a map, one record per run")
    p.add_argument("--first", type=int, required=True, help="first byte of the chunk")
    p.add_argument("--last", type=int, required=True, help="last byte of the chunk")
    p.add_argument("--chunk", type=int, default=0, help="the chunk's index in its range")
    shared.add_job(p)
    p.set_defaults(run=_map_chunk)


def _map_chunk(args: argparse.Namespace) -> None:
    job = shared.job(args, paths.MAP)
    span = maps.Span(args.first, args.last)
    m = stages.map_span(job, span, args.chunk, shared.progress(args.chunk, span))
    maps.write(m, args.out)
    print(f"{args.trace} {args.policy} chunk {args.chunk}: {m.runs:,} runs")


def _add_map_merge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map-merge", description="one trace × policy's map chunks as one map")
    p.add_argument("--trace", required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--baseline", type=Path, required=True, help="the trace's baseline JSON")
    p.add_argument("--maps", type=Path, nargs="*", default=[], help="chunk maps (Parquet)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(run=_map_merge)


def _map_merge(args: argparse.Namespace) -> None:
    peak = stages.read_output(args.baseline)["peak_memory"]
    empty = maps.Map(args.trace, args.policy, peak, (), (), {})
    merged = maps.merge([empty, *(maps.read(p) for p in args.maps)], str(args.out))
    maps.write(merged, args.out)
    print(f"{merged.trace} {merged.policy}: {merged.runs:,} runs, {len(merged.tiles):,} tiles")


def _add_map_table(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map-table", description="holes of exact maps beside the sampled stages")
    p.add_argument("--maps", type=Path, nargs="*", default=[], help="merged maps (Parquet)")
    p.add_argument("--records", type=Path, required=True, help="records table (Parquet)")
    p.add_argument("--out", type=Path, required=True, help="series table (Parquet)")
    p.add_argument("--holes", type=Path, required=True, help="holes table (Parquet)")
    p.add_argument("--markdown", type=Path, required=True)
    p.set_defaults(run=_map_table)


def _map_table(args: argparse.Namespace) -> None:
    found = [maps.read(p) for p in args.maps]
    series, found_holes = map_tables.tabulate(found, sampled_holes.read_rows(args.records))
    map_tables.write(series, found_holes, args.out, args.holes, args.markdown)
    print("\n".join(map_tables.verdicts(series)))


def _add_map_figure(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map-figure", description="a trace's map strips and hole zooms (PNG, PDF)")
    p.add_argument("--trace", required=True)
    p.add_argument("--maps", type=Path, nargs="*", default=[], help="the trace's merged maps")
    p.add_argument("--out", type=Path, required=True, help="figure path without extension")
    p.set_defaults(run=_map_figure)


def _map_figure(args: argparse.Namespace) -> None:
    from dtrholes.report import figures  # plotting libraries load only for commands that plot

    figures.save(figures.map_strips([maps.read(p) for p in args.maps], args.trace), args.out)


STEPS = (
    _add_fetch,
    _add_baseline,
    _add_rank,
    _add_sweep,
    _add_refine,
    _add_noise_table,
    _add_edges,
    _add_repeat,
    _add_explain_regions,
    _add_gather,
    _add_holes,
    _add_compare,
    _add_paper,
    _add_crosscheck,
    _add_figures,
    _add_zoom,
    _add_figure1,
    _add_map_plan,
    _add_map_chunk,
    _add_map_merge,
    _add_map_table,
    _add_map_figure,
)


def add(sub: argparse._SubParsersAction) -> None:
    """The pipeline's steps, in the order the pipeline runs them: each callable by name (the
    rules' commands), described by its own `--help`, and listed by one command, `steps`, instead
    of beside the user's commands (a parser added without `help` is not listed)."""
    before = set(sub.choices)
    for step in STEPS:
        step(sub)
    added = [(name, p.description) for name, p in sub.choices.items() if name not in before]
    width = max(len(name) for name, _ in added)
    listing = "\n".join(f"  {name:<{width}}  {what}" for name, what in added)
    p = sub.add_parser(
        "steps",
        help="the pipeline's steps, run by the workflow's rules: dtr-holes steps --help",
        description="The pipeline's steps, run by the workflow's rules (each with its --help):",
        epilog=listing,
        formatter_class=shared.Help,
    )
    p.set_defaults(run=lambda _: p.print_help())
