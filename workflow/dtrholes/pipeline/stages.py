"""The pipeline's simulation stages: sweeps, refinement planning, exact edges, repeats and
explanations."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dtrholes.core import paths
from dtrholes.core.samples import COMPLETE, Sample
from dtrholes.explain import build
from dtrholes.explain.types import Citations, Explanation
from dtrholes.holes import edges, maps, sampled_holes
from dtrholes.study import plan, records, runner, simrd
from dtrholes.study.parameters import Parameters
from dtrholes.study.records import Request
from dtrholes.traces import betweenness, fetch
from simulator import Policy, Result, Trace, UserError, budget_for, get_policy
from simulator.result import OK


@dataclass(frozen=True)
class Job:
    """One pipeline job's inputs: what it runs on and the protocol values it reads."""

    trace: str
    policy: str
    spec: dict  # plan.job_spec: the protocol values the job reads and their amendments
    version: str  # the protocol version in effect, which labels the job's records
    baseline: dict  # the trace's sha256, peak memory and model compute
    data: Path
    sheet: Path
    results: Path

    @property
    def params(self) -> Parameters:
        return plan.parameters(self.spec)

    def request(
        self,
        stage: str,
        budget: int,
        ratio: float | None,
        repeat: int = 0,
        cap: float | None = None,
    ) -> Request:
        """A run of this job; `cap` overrides the protocol's overhead cap (edge probes)."""
        params = self.params
        chosen = self.chosen
        return Request(
            trace=self.trace,
            trace_sha256=self.baseline["sha256"],
            policy=self.policy,
            params=chosen.resolve(params.policy_values(self.policy)),
            budget=budget,
            ratio=ratio,
            overhead_cap=params.limits.overhead_cap if cap is None else cap,
            wall_clock_s=params.limits.wall_clock_s,
            stage=stage,
            repeat=repeat,
            protocol_version=self.version,
            amendments=tuple(self.spec["amendments"]),
            policy_source=chosen.source,
            policy_sha256=chosen.source_sha256,
            trace_origin=origin(self.baseline),
        )

    @property
    def chosen(self) -> Policy:
        """The job's policy; for a policy from a file, the file as it was when the job was
        planned (its sha256 is in the job's spec), else an error: nothing runs an edited one."""
        chosen = get_policy(self.params.policy_ref(self.policy))
        planned = self.spec.get("policy_sha256")
        if planned != chosen.source_sha256:
            raise UserError(
                f"policy {self.policy} ({chosen.source})",
                f"the file as planned (sha256 {planned})",
                f"sha256 {chosen.source_sha256}: run the same command again to replan",
            )
        return chosen

    def at_ratio(self, stage: str, point: plan.Point) -> Request:
        budget = budget_for(None, point.ratio, peak=self.baseline["peak_memory"])
        return self.request(stage, budget, point.ratio, point.repeat)

    def session(self, fresh: bool = False) -> runner.Session:
        return runner.Session(self.loader(), self.records, self.results, fresh)

    def loader(self):
        return functools.partial(load_trace, data=self.data, sheet=self.sheet)

    @property
    def records(self) -> Path:
        return self.results / "records"


def origin(baseline: dict) -> str | None:
    """What the records of an own trace say of it (its sheet file and its provenance line), as
    the canonical JSON a Request carries; None for the study's traces."""
    if "file" not in baseline:
        return None
    found = {"file": baseline["file"], "provenance": baseline["provenance"]}
    return json.dumps(found, sort_keys=True, separators=(",", ":"))


def load_trace(name: str, data: Path, sheet: Path) -> Trace:
    """A trace from the pipeline's fetched archive (module level: worker processes call it)."""
    return fetch.load_trace(name, data, str(data / fetch.ARCHIVE_NAME), sheet=sheet)


def sweep(job: Job, stage: str, points: list[plan.Point]) -> list[str]:
    """Run the points (those without a record yet); the run ids of all of them."""
    requests = [job.at_ratio(stage, p) for p in points]
    runner.run_requests(requests, job.loader(), job.records, job.results)
    return [r.run_id for r in requests]


def listing(run_ids: list[str], directory: Path) -> dict:
    """What a job output says of the records it lists: their run ids in order, and each
    file's sha256 (the audit checks the files against it)."""
    return {"run_ids": run_ids, records.SHA256_KEY: records.checksums(directory, run_ids)}


def listed_records(lists: Iterable[Path], directory: Path) -> list[dict]:
    """The records that job outputs list, in the order listed."""
    return [
        records.read_record(records.record_path(directory, run_id))
        for path in lists
        for run_id in read_output(path)["run_ids"]
    ]


def read_output(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def by_series(outputs: Iterable[Path], key: str) -> dict[tuple[str, str], list]:
    """Per-series job outputs (edges, repeats) by trace × policy: each one's value at `key`."""
    return {paths.series_key(p): read_output(p)[key] for p in outputs}


def refinement_samples(listed: list[dict]) -> list[Sample]:
    """Stage A and C records as refinement reads them: completed runs only."""
    return [
        Sample(
            policy=r["policy"]["name"],
            stage=r["stage"],
            ratio=r["ratio"],
            outcome=r["result"]["outcome"],
            overhead=r["result"]["overhead"] if r["result"]["outcome"] == OK else None,
        )
        for r in listed
        if r["status"] == COMPLETE
    ]


def series(listed: list[dict]) -> list[Sample]:
    """The sampled series of one trace × policy (every sampling and point stage), one sample
    per run."""
    return [sampled_holes.sample_of(r) for r in listed if plan.is_sample(r["stage"])]


def first_results(listed: list[dict]) -> dict[int, Result]:
    """Each sampled budget's Result, from its first complete record."""
    return {budget: result for budget, (_, result) in _cited(listed).items()}


def find_edges(
    job: Job, listed: list[dict], progress: Callable[[str], None] = print
) -> tuple[list[dict], list[str]]:
    """The exact edge between every adjacent pair of resolved samples that differ in
    feasibility, with a progress line per edge; returns the edges and the run ids of the
    bisection runs."""
    known = first_results(listed)
    resolved = [s for s in sampled_holes.collapse(series(listed)) if s.resolved]
    pairs = [
        (a, b)
        for a, b in zip(resolved, resolved[1:], strict=False)
        if edges.feasible(a.outcome) != edges.feasible(b.outcome)
    ]
    run_ids: list[str] = []
    found = []
    search = job.params.edges
    with job.session() as session:

        def run(budget: int, cap: float | None) -> Result | None:
            request = job.request(paths.EDGE, budget, None, cap=cap)
            run_ids.append(request.run_id)
            return session.run(request)[0]

        for i, (a, b) in enumerate(pairs, 1):
            edge = edges.exact_edge(
                run,
                known[a.budget],
                known[b.budget],
                max_runs=search.max_runs,
                split=search.split,
                probe_factor=search.probe_factor,
                probe_floor=search.probe_floor,
                probe_raise=search.probe_raise,
            )
            found.append(_edge_row(job, a, b, edge))
            progress(
                f"[{i}/{len(pairs)}] {job.trace} {job.policy} edge {edge.below:,} | "
                f"{edge.above:,} bytes: {edge.outcome_below} | {edge.outcome_above}, "
                f"{edge.runs} runs"
            )
    return found, run_ids


def _edge_row(job: Job, a: Sample, b: Sample, edge: edges.Edge) -> dict:
    peak = job.baseline["peak_memory"]
    return {
        "low_sample": a.budget,
        "high_sample": b.budget,
        "below": edge.below,
        "above": edge.above,
        "ratio": edge.below / peak,
        "outcome_below": edge.outcome_below,
        "outcome_above": edge.outcome_above,
        "resolved": edge.resolved,
        "runs": edge.runs,
    }


def repeat_regions(
    job: Job, listed: list[dict], progress: Callable[[str], None] = print
) -> tuple[list[dict], list[str]]:
    """Rerun every confirmation point of every region `repeats` times, each in a fresh process,
    and compare each Result with the original, with a progress line per region; returns the
    regions and the repeats' run ids. Repeat i of every point comes from the i-th fresh
    session: its own spawned interpreter (hash seed included) whose forked children run one
    repeat each."""
    confirmation = job.params.confirmation
    known = first_results(listed)
    collapsed = sampled_holes.collapse(series(listed))
    ratios = {s.budget: s.ratio for s in collapsed}
    regions, run_ids = [], []
    with contextlib.ExitStack() as stack:
        sessions = [
            stack.enter_context(job.session(fresh=True)) for _ in range(confirmation.repeats)
        ]
        found = sampled_holes.summarise(collapsed).holes
        for number, region in enumerate(found, 1):
            points = []
            for budget in sampled_holes.confirmation_points(region, collapsed, confirmation.points):
                disagree = []
                for i, session in enumerate(sessions, 1):
                    request = job.request(paths.REPEAT, budget, ratios[budget], i)
                    run_ids.append(request.run_id)
                    result = session.run(request)[0]
                    if result != known[budget]:
                        disagree.append(i)
                points.append(
                    {"budget": budget, "outcome": known[budget].outcome, "disagree": disagree}
                )
            confirmed = all(not p["disagree"] for p in points)
            regions.append({**region.bracket(), "points": points, "confirmed": confirmed})
            progress(
                f"[{number}/{len(found)}] {job.trace} {job.policy} region"
                f" {region.first:,}-{region.last:,} bytes, {len(points)} points:"
                f" {'confirmed' if confirmed else 'repeats disagree'}"
            )
    return regions, list(dict.fromkeys(run_ids))  # a point bracketing two regions: once


def explain_regions(
    job: Job, listed: list[dict], regions: list[dict], progress: Callable[[str], None] = print
) -> list[Explanation]:
    """Explain both edge brackets of every confirmed region (the completing sample below and the
    first failing one; the last failing one and the completing sample above), with a progress
    line per pair. Each explanation cites the records of its two runs, and its replays must
    equal them; the failing run's record is the retention's control."""
    trace = job.loader()(job.trace)
    request = job.request(paths.EXPLAIN, 0, None)
    cited = _cited(listed)
    pairs = [
        pair
        for region in regions
        if region["confirmed"]
        for pair in (
            (region["ok_below"], region["first_fail"]),
            (region["ok_above"], region["last_fail"]),
        )
    ]
    probe = job.params.explain
    ref = request.policy_ref
    central = betweenness.for_policy(trace, ref, dict(request.params), job.results)
    runs = build.Runs()  # a budget two pairs share is replayed once
    found = []
    for i, (ok, fail) in enumerate(pairs, 1):
        pair = build.Pair(
            trace,
            ref,
            ok,
            fail,
            request.params,
            request.overhead_cap,
            job.baseline["peak_memory"],
            central,
        )
        x = build.explain(
            pair,
            top=probe.top,
            decisions=probe.decisions,
            control=cited[fail][1],
            runs=runs,
        )
        for stated, budget in ((x.ok, ok), (x.fail, fail)):
            run_id, result = cited[budget]
            if build.summary(result, pair.peak) != stated:
                raise UserError(
                    f"record {run_id}", "the replay of the recorded run", "a different run"
                )
        found.append(dataclasses.replace(x, cites=Citations(ok=cited[ok][0], fail=cited[fail][0])))
        progress(f"[{i}/{len(pairs)}] {job.trace} {job.policy} pair {ok:,} | {fail:,} bytes")
    return found


def _cited(listed: list[dict]) -> dict[int, tuple[str, Result]]:
    """Each sampled budget's first complete record: its run id and Result."""
    found: dict[int, tuple[str, Result]] = {}
    for r in listed:
        if plan.is_sample(r["stage"]) and r["status"] == COMPLETE:
            found.setdefault(r["budget"], (r["run_id"], Result.from_dict(r["result"])))
    return found


def crosscheck_points(
    rows: list[dict],
    repeats: dict,
    policies: list[str],
    model_compute: dict[str, int],
    study: Iterable[tuple[str, str, int]] = (),
) -> list[dict]:
    """The confirmation points of the regions of `policies`, then the budgets where the study
    ran unmodified simrd (`study`: trace, policy, budget, where that run is a sample here),
    each with our Result's compared fields.

    `rows`: records-table rows; `repeats`: (trace, policy) -> the repeat job's regions;
    `model_compute`: each trace's total model compute (the overhead cap's unit).
    """
    ours = {
        (r["trace"], r["policy"], r["budget"]): r
        for r in rows
        if plan.is_sample(r["stage"]) and r["status"] == COMPLETE
    }
    wanted = [
        (trace, policy, budget)
        for (trace, policy), regions in sorted(repeats.items())
        if policy in policies
        for budget in sorted({p["budget"] for region in regions for p in region["points"]})
    ]
    wanted += [key for key in study if key in ours]
    return [_crosscheck_point(ours[key], model_compute) for key in dict.fromkeys(wanted)]


def _crosscheck_point(row: dict, model_compute: dict[str, int]) -> dict:
    return {
        "trace": row["trace"],
        "trace_sha256": row["trace_sha256"],
        "policy": row["policy"],
        "budget": row["budget"],
        "ratio": row["ratio"],
        "cap": row["overhead_cap"],
        "model_compute": model_compute[row["trace"]],
        "protocol_version": row["protocol_version"],
        "ours": {k: row[k] for k in simrd.COMPARED},
    }


def map_span(job: Job, span: maps.Span, chunk: int = 0, progress=None) -> maps.Map:
    """One chunk of a map, each run recorded."""
    peak = job.baseline["peak_memory"]
    with job.session() as session:

        def run(budget: int) -> tuple[Result | None, str]:
            request = job.request(paths.MAP, budget, None)
            return session.run(request)[0], request.run_id

        tiles = maps.tile(run, span, job.params.maps.max_runs, chunk, progress)
    run_ids = [t.run_id for t in tiles if t.run_id is not None]
    checksums = records.checksums(job.records, run_ids)
    return maps.Map(job.trace, job.policy, peak, (span,), tuple(tiles), checksums)


def map_plan(
    params: Parameters,
    peak: int,
    listed: dict[str, list[dict]],
    whole: bool,
    unmapped: frozenset[str] = frozenset(),
) -> dict:
    """Which byte ranges each policy's map covers on one trace: the protocol range when its
    estimated run count is below the cap (or `whole`), else the neighbourhoods of every hole
    region any policy's sampled series shows; none for the `unmapped` ones (see reads_budget).
    `listed`: each policy's sampled records."""
    ratios, spec = params.stage_a.ratios, params.maps
    span = maps.Span(*(budget_for(None, end, peak) for end in (ratios.start, ratios.stop)))
    margin = int(spec.margin * peak)
    around = [
        maps.Span(max(span.first, r.ok_below - margin), min(span.last, r.ok_above + margin))
        for found in listed.values()
        for r in sampled_holes.summarise(series(found)).holes
    ]
    near = [[s.first, s.last] for s in maps.union(around)]
    plans = {}
    for policy, found in sorted(listed.items()):
        if policy in unmapped:
            plans[policy] = {"estimate": 0, "whole": False, "ranges": [], "reads_budget": True}
            continue
        results = [Result.from_dict(r["result"]) for r in found if _complete_a(r)]
        estimate = maps.estimate_runs(results, span)
        mapped_whole = whole or estimate <= spec.whole_range_cap
        ranges = [[span.first, span.last]] if mapped_whole else near
        plans[policy] = {"estimate": estimate, "whole": mapped_whole, "ranges": ranges}
    return {"span": [span.first, span.last], "neighbourhoods": near, "policies": plans}


def reads_budget(records: list[dict]) -> bool:
    """Whether the policy of these records reads the budget: each of its runs certifies one
    budget, and a map would run every byte of its range."""
    policy = records[0]["policy"]
    return get_policy(policy.get("source", policy["name"])).budget_dependent


def _complete_a(record: dict) -> bool:
    return record["stage"] == paths.STAGE_A and record["status"] == COMPLETE
