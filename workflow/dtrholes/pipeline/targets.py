"""What a run of the pipeline makes: the rules' target lists, from the run's settings."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from dtrholes.core import paths
from dtrholes.holes import maps, noise
from dtrholes.study import plan
from dtrholes.study.parameters import Parameters
from dtrholes.study.settings import Settings
from dtrholes.traces import betweenness

# A trace's Stage B intervals ([low, high] ratios), read from its refinement plan: common.smk
# passes a function that asks Snakemake for the plan (a checkpoint), so that only the targets of
# Stage B wait for it.
Intervals = Callable[[str], list[list[float]]]
FIGURES = ("cliffs", "overhead")  # the figures of every trace with a sampled series


@dataclass(frozen=True)
class Targets:
    """A run's settings and the options of the config that decide what it makes. Figure 1's
    traces and policy come from the study's own names (`dtrholes.report.paper.published`)."""

    settings: Settings
    protocol_dir: str
    broad: bool = False  # dtr-holes' broader sweep: every trace and policy through A, B and C
    maps: bool = False  # the exact maps (days of CPU)
    per_job: int = 100  # points per sampling job
    figure1: tuple[str, ...] = ()
    figure1_policy: str = "dtr"

    @property
    def params(self) -> Parameters:
        return self.settings.protocol.params

    @property
    def traces(self) -> tuple[str, ...]:
        return self.settings.traces

    @property
    def policies(self) -> tuple[str, ...]:
        return self.settings.policies

    @cached_property
    def stages(self) -> dict[str, str]:
        """The protocol's stages that run points: sampled (A, C, then B) and fixed (development
        and confirmation), each by the name its records carry, keyed by its name in paths."""
        return {paths.stage_key(s): s for s in paths.stages(self.params.points)}

    def spec(self, kind: str, policy: str | None = None) -> str:
        """The protocol values (and amendments) a job reads, as the JSON its command receives."""
        return json.dumps(plan.job_spec(self.settings.protocol, kind, policy), sort_keys=True)

    def broad_for(self, trace: str) -> bool:
        """Whether a trace runs the broader sweep's stages: all with `broad`, an own trace
        always."""
        return self.broad or trace in self.settings.own

    def sampled(self, trace: str) -> bool:
        """Whether a trace has sampled stages (A, C, B)."""
        return trace in self.settings.own or trace in plan.sampled_traces(self.params, self.broad)

    def stage_points(
        self, stage: str, trace: str, policy: str, refined: Intervals | None = None
    ) -> list[plan.Point]:
        """The points a stage asks of a trace × policy (Stage B: inside the intervals that
        `refined` reads from the trace's plan)."""
        if stage != paths.STAGE_B:
            own = self.settings.own.get(trace)
            return plan.stage_points(self.params, stage, trace, policy, self.broad, own)
        if not self.sampled(trace) or policy not in self.refined_policies(trace):
            return []
        if refined is None:
            raise ValueError(f"Stage B's points on {trace} need its refinement plan")
        return plan.stage_b_points(self.params, refined(trace))

    def refined_policies(self, trace: str) -> list[str]:
        """The policies Stage B runs on a trace, whose Stage A and C outcomes its trigger reads."""
        return plan.stage_policies(self.params, paths.STAGE_B, self.broad_for(trace))

    def stage_outputs(
        self, stage: str, trace: str, policy: str, refined: Intervals | None = None
    ) -> list[str]:
        """The job outputs of one stage on one trace × policy."""
        points = self.stage_points(stage, trace, policy, refined)
        jobs = plan.job_count(points, self.per_job) if points else 0
        return [paths.sweep_job(stage, trace, policy, job) for job in range(jobs)]

    def job_points(
        self, key: str, trace: str, policy: str, job: int, refined: Intervals | None = None
    ) -> str:
        """A sampling job's points (`key`: its stage's name in paths), as its parameter."""
        points = self.stage_points(self.stages[key], trace, policy, refined)
        return plan.format_points(plan.job_points(points, self.per_job, job))

    def sampled_outputs(
        self,
        refined: Intervals | None = None,
        traces: Iterable[str] | None = None,
        policies: Iterable[str] | None = None,
        stages: Iterable[str] | None = None,
    ) -> list[str]:
        """The sampling jobs' outputs of the given traces, policies and stages, in this order
        (default: every one); the one place the pipeline lists them."""
        traces = self.traces if traces is None else traces
        policies = self.policies if policies is None else list(policies)
        stages = self.stages.values() if stages is None else list(stages)
        return [
            path
            for trace in traces
            for policy in policies
            for stage in stages
            for path in self.stage_outputs(stage, trace, policy, refined)
        ]

    def unrefined_outputs(self, trace: str) -> list[str]:
        """The Stage A and C outputs that Stage B's trigger reads on a trace: its policies'."""
        frozen = self.refined_policies(trace)
        trigger = [p for p in self.policies if p in frozen]
        return self.sampled_outputs(None, [trace], trigger, (paths.STAGE_A, paths.STAGE_C))

    def has_series(self, trace: str, policy: str) -> bool:
        """Whether a trace × policy has samples (Stage B refines only where Stage A ran)."""
        planned = paths.planned(self.params.points)
        return any(self.stage_points(s, trace, policy) for s in planned)

    @cached_property
    def series(self) -> list[tuple[str, str]]:
        """Every trace × policy with a sampled series."""
        return [(t, p) for t in self.traces for p in self.policies if self.has_series(t, p)]

    def series_outputs(self, kind: str) -> list[str]:
        """The outputs of one per trace × policy stage, if the protocol has that stage."""
        section = {
            paths.EDGES: self.params.edges,
            paths.REPEATS: self.params.confirmation,
            paths.EXPLANATIONS: self.params.explain,
        }[kind]
        return [] if section is None else [paths.series(kind, t, p) for t, p in self.series]

    def study_tables(self) -> list[str]:
        """The study's evidence table, whose Stage B intervals the plan refines too (if any)."""
        study = self.params.stage_b.study
        return [os.path.join(self.protocol_dir, study)] if study else []

    def ranking(self, trace: str, policy: str) -> list[str]:
        """The trace's storage ranking that a policy's jobs read (none for the others)."""
        seed = betweenness.ranking_seed(
            self.params.policy_ref(policy), self.params.policy_values(policy)
        )
        if seed is None:
            return []
        sha256 = {e.name: e.sha256 for e in self.settings.entries}[trace]
        return [str(betweenness.cache_path(paths.RESULTS, trace, sha256, seed))]

    def mapped(self) -> list[str]:
        """The traces whose maps run: none unless the config asks for maps (they take days),
        then those with a Stage A range, if the protocol has the map stage."""
        if not self.maps or self.params.maps is None:
            return []
        return [t for t in self.traces if self.sampled(t)]

    def trace_maps(self, trace: str) -> list[str]:
        return [paths.merged_map(trace, p) for p in self.policies]

    def map_outputs(self) -> list[str]:
        """Every mapped trace × policy's merged map."""
        return [path for t in self.mapped() for path in self.trace_maps(t)]

    def map_targets(self) -> list[str]:
        """The map stage's table and figures, if maps run."""
        if not self.mapped():
            return []
        return [
            paths.table("maps", "md"),
            *(paths.figure("maps", t) + ".pdf" for t in self.mapped()),
        ]

    def noise_series(self) -> list[noise.Perturbed]:
        """The mapped traces generated by log-normal cost noise from another mapped trace."""
        found, mapped = noise.perturbations(self.settings.entries), self.mapped()
        return [p for p in found if p.name in mapped and p.base in mapped]

    def noise_maps(self) -> list[str]:
        """The maps the cost-noise table reads: the perturbed traces' and their originals'."""
        traces = dict.fromkeys(t for p in self.noise_series() for t in (p.base, p.name))
        return [path for t in traces for path in self.trace_maps(t)]

    def noise_targets(self) -> list[str]:
        """The cost-noise study's table and figure, if the run maps perturbed traces."""
        if not self.noise_series():
            return []
        return [paths.table("noise", "md"), paths.figure("noise") + ".pdf"]

    def figure1_traces(self) -> list[str]:
        """The traces of the study's Figure 1 with a sampled series under its policy."""
        return [t for t in self.figure1 if (t, self.figure1_policy) in self.series]

    def figure1_baselines(self) -> list[str]:
        return [paths.baseline(t) for t in self.figure1_traces()]

    def figure1_path(self) -> str:
        return paths.figure("figure1", self.figure1_policy)

    def figure_outputs(self) -> list[str]:
        """Every figure's PDF: per trace, per trace × policy (zooms), and Figure 1 if it has a
        trace."""
        figured = list(dict.fromkeys(t for t, _ in self.series))
        return [
            *(paths.figure(kind, t) + ".pdf" for kind in FIGURES for t in figured),
            *(paths.figure("zoom", t, p) + ".pdf" for t, p in self.series),
            *([self.figure1_path() + ".pdf"] if self.figure1_traces() else []),
        ]

    def protocol_render(self) -> str:
        return paths.protocol_render(self.settings.protocol.version)

    def all_outputs(self) -> list[str]:
        """What `rule all` asks for: the tables, the audit's report, the protocol as the jobs
        read it, the figures, the explanations, and the maps' and cost noise's tables."""
        return [
            paths.records_table(),
            *(paths.table(name, "md") for name in paths.TABLES),
            paths.audit_report("md"),
            self.protocol_render(),
            *self.figure_outputs(),
            *self.series_outputs(paths.EXPLANATIONS),
            *self.map_targets(),
            *self.noise_targets(),
        ]


def of(
    settings: Settings, config: Mapping, figure1: Sequence[str] = (), figure1_policy: str = "dtr"
) -> Targets:
    """The targets of a run with checked `settings` and the (validated) `config`."""
    return Targets(
        settings,
        config["protocol"],
        config["broad"],
        config["maps"],
        config["points_per_job"],
        tuple(figure1),
        figure1_policy,
    )


def intervals(refinement_plan: dict) -> list[list[float]]:
    """The [low, high] intervals of a trace's refinement plan."""
    return [[i["low"], i["high"]] for i in refinement_plan["intervals"]]


def map_ranges(map_plan: dict, jobs: list[str], policy: str) -> list[maps.Span] | None:
    """The byte ranges of a trace × policy's map, from the trace's map plan; None if the plan
    was made from other series than `jobs` (a policy added since), as if it were missing."""
    if map_plan.get("jobs") != jobs or policy not in map_plan["policies"]:
        return None
    return [maps.Span(*r) for r in map_plan["policies"][policy]["ranges"]]


def map_chunks(trace: str, policy: str, ranges: list[maps.Span], per_range: int) -> list[str]:
    """The chunk outputs of one trace × policy's map: each range cut into `per_range` chunks."""
    return [
        paths.map_chunk(trace, policy, c.first, c.last) for _, c in maps.chunks(ranges, per_range)
    ]


def chunk_index(ranges: list[maps.Span], per_range: int, first: int, last: int) -> int:
    """A chunk's index within its range (a column of the map table)."""
    wanted = maps.Span(first, last)
    return next((i for i, c in maps.chunks(ranges, per_range) if c == wanted), 0)


def priority(order: Sequence[str], trace: str) -> int:
    """Jobs of the traces listed in `order` (the costliest first) start first, the first listed
    first: the long chains of the costliest traces then overlap the others' jobs instead of
    ending the run alone (Snakemake starts the ready job of highest priority)."""
    return len(order) - order.index(trace) if trace in order else 0


def option(flag: str, values: Iterable[str | None]) -> str:
    """A command-line option once per value given (None or empty: not given)."""
    return " ".join(f"{flag} {value}" for value in values if value)


def published_files(directory: Path) -> list[str]:
    """The study's published tables and its own names and rules, which the comparison with the
    study reads."""
    return sorted(str(p) for pattern in ("*.csv", "*.yaml") for p in directory.glob(pattern))
