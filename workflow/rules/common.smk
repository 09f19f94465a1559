# Small helpers shared by the stages: validated config, the protocol, each job's protocol values.
# Every path comes from dtrholes.paths (with no arguments, a path function gives its pattern).
import json
import os
import sys

from snakemake.exceptions import IncompleteCheckpointException
from snakemake.io import checkpoint_target

from dtrholes.traces import betweenness
from dtrholes.study import simrd, plan, protocol, settings
from dtrholes.holes import maps, noise
from dtrholes.report import paper
from dtrholes.core import paths
from dtrholes.pipeline import stages
from simulator import UserError

# The project's command line, run by the interpreter running Snakemake (no PATH assumptions).
# `exec`: the job is the child of this Snakemake process (no shell between them), and stops
# when a killed Snakemake leaves it behind.
DTR_HOLES = f'exec "{sys.executable}" -m dtrholes --exit-with-parent {os.getpid()}'

try:  # a mistake in the settings, the protocol or the trace sheet: one line, no traceback
    SETTINGS = settings.load(config)
except UserError as error:
    sys.exit(f"dtr-holes: {error}")
PROTOCOL = SETTINGS.protocol
PARAMS = PROTOCOL.params
# dtr-holes' broader sweep: every trace and policy through Stages A, B and C, not the study's.
BROAD = config["broad"]
TRACES = list(SETTINGS.traces)
POLICIES = list(SETTINGS.policies)
# The own traces (the sheet's role `own`) run: name -> sha256, which seeds their samples.
OWN = SETTINGS.own
# The protocol's stages that run points: sampled (A, C, then B) and fixed (development and
# confirmation), each by the name its records carry, keyed by its name in paths.
STAGES = {paths.stage_key(s): s for s in paths.stages(PARAMS.points)}
SHA256 = {entry.name: entry.sha256 for entry in SETTINGS.entries}
SIMRD = config["simrd_source"] or os.environ.get(simrd.SIMRD_ENV)
PUBLISHED = paper.PUBLISHED  # the study's published results, as data


wildcard_constraints:
    trace="|".join(TRACES),
    policy="|".join(POLICIES),
    job=r"\d+",
    first=r"\d+",
    last=r"\d+",
    stage="|".join(STAGES),
    digest="[0-9a-f]{16}",
    seed=r"\d+",


def trace_priority(wildcards):
    """Jobs of the traces listed in `costliest_first` start first, the first listed first: the
    long chains of the costliest traces then overlap the others' jobs instead of ending the run
    alone (Snakemake starts the ready job of highest priority)."""
    order = config["costliest_first"]
    return len(order) - order.index(wildcards.trace) if wildcards.trace in order else 0


def spec(kind, policy=None):
    """The protocol values (and amendments) a job reads, as the JSON its command receives."""
    return json.dumps(plan.job_spec(PROTOCOL, kind, policy), sort_keys=True)


def sweep_spec(wildcards):
    return spec(STAGES[wildcards.stage], wildcards.policy)


def edge_spec(wildcards):
    return spec(paths.EDGE, wildcards.policy)


def repeat_spec(wildcards):
    return spec(paths.REPEAT, wildcards.policy)


def explain_spec(wildcards):
    return spec(paths.EXPLAIN, wildcards.policy)


def broad_for(trace):
    """Whether a trace runs the broader sweep's stages: all with `broad`, an own trace always."""
    return BROAD or trace in OWN


def sampled(trace):
    """Whether a trace has sampled stages (A, C, B)."""
    return trace in OWN or trace in plan.sampled_traces(PARAMS, BROAD)


def stage_points(stage, trace, policy):
    """The points a stage asks of a trace × policy (Stage B: after the trace's plan)."""
    if stage != paths.STAGE_B:
        return plan.stage_points(PARAMS, stage, trace, policy, BROAD, OWN.get(trace))
    frozen = plan.stage_policies(PARAMS, stage, broad_for(trace))
    if not sampled(trace) or policy not in frozen:
        return []
    refine = checkpoints.plan_refinement.get(trace=trace).output[0]
    intervals = stages.read_output(refine)["intervals"]
    return plan.stage_b_points(PARAMS, [[i["low"], i["high"]] for i in intervals])


def stage_outputs(stage, trace, policy):
    """The job outputs of one stage on one trace × policy."""
    points = stage_points(stage, trace, policy)
    jobs = plan.job_count(points, config["points_per_job"]) if points else 0
    return [paths.sweep_job(stage, trace, policy, job) for job in range(jobs)]


def sampled_outputs(traces=TRACES, policies=POLICIES, stages=STAGES.values()):
    """The sampling jobs' outputs of the given traces, policies and stages, in this order
    (default: every one); the one place the pipeline lists them."""
    return [
        path
        for trace in traces
        for policy in policies
        for stage in stages
        for path in stage_outputs(stage, trace, policy)
    ]


def unrefined_outputs(wildcards):
    """The Stage A and C outputs that Stage B's trigger reads on a trace: its policies'."""
    frozen = plan.stage_policies(PARAMS, paths.STAGE_B, broad_for(wildcards.trace))
    trigger = [p for p in POLICIES if p in frozen]
    return sampled_outputs([wildcards.trace], trigger, (paths.STAGE_A, paths.STAGE_C))


def series_jobs(wildcards):
    """The outputs of one trace × policy's sampled series (every stage). Asks for the trace's
    refinement plan, so only this trace's jobs wait for it. (Rules that read them take no other
    input: while the plan is pending, Snakemake stands the plan in for all of their inputs.)
    """
    return sampled_outputs([wildcards.trace], [wildcards.policy])


def has_series(trace, policy):
    """Whether a trace × policy has samples (Stage B refines only where Stage A ran)."""
    return any(stage_points(s, trace, policy) for s in paths.planned(PARAMS.points))


SERIES = [(t, p) for t in TRACES for p in POLICIES if has_series(t, p)]


def ranking_input(wildcards):
    """A sampling job of a policy that ranks storages waits for the trace's ranking, computed
    once (else concurrent jobs of a trace each computed it, inside their first timed run).
    """
    seed = betweenness.ranking_seed(
        PARAMS.policy_ref(wildcards.policy), PARAMS.policy_values(wildcards.policy)
    )
    if seed is None:
        return []
    return str(
        betweenness.cache_path(
            paths.RESULTS, wildcards.trace, SHA256[wildcards.trace], seed
        )
    )


def sweep_points(wildcards):
    """The job's points: a parameter, so that a job reruns exactly when its points change."""
    points = stage_points(STAGES[wildcards.stage], wildcards.trace, wildcards.policy)
    chunk = plan.job_points(points, config["points_per_job"], int(wildcards.job))
    return plan.format_points(chunk)


def all_sampled_outputs(wildcards):
    """Every sampling job's output, for the records table."""
    return sampled_outputs()


def refine_input(wildcards):
    """Stage B jobs come after the trace's plan, but a new plan reruns only the jobs whose
    points it changes (their `points` parameter), hence `ancient`."""
    if STAGES[wildcards.stage] != paths.STAGE_B:
        return []
    return ancient(paths.refinement_plan(wildcards.trace))


def study_input():
    """The study's evidence table, whose Stage B intervals the plan refines too (if any)."""
    study = PARAMS.stage_b.study
    return [os.path.join(config["protocol"], study)] if study else []


def study_option():
    return " ".join(f"--study {path}" for path in study_input())


# Per trace × policy stages and the protocol section that switches each on.
SERIES_STAGES = {
    paths.EDGES: PARAMS.edges,
    paths.REPEATS: PARAMS.confirmation,
    paths.EXPLANATIONS: PARAMS.explain,
}


def series_outputs(kind):
    """The outputs of one per trace × policy stage, if the protocol has that stage."""
    if SERIES_STAGES[kind] is None:
        return []
    return [paths.series(kind, t, p) for t, p in SERIES]


def trace_series_jobs(wildcards):
    """The sampled series of every policy on a trace: what the map plan reads."""
    return sampled_outputs([wildcards.trace])


def map_spec(wildcards):
    return spec(paths.MAP, wildcards.policy)


def whole_option(wildcards):
    return "--whole" if wildcards.trace in config["map_whole"] else ""


def map_ranges(trace, policy):
    """The byte ranges of a trace × policy's map, from the trace's map plan. A plan made from
    other series than the current ones (a policy added since) is waited for like a missing
    one: its checkpoint reruns, since its inputs changed."""
    found = checkpoints.plan_maps.get(trace=trace).output[0]
    planned = stages.read_output(found)
    if (
        planned.get("jobs") != sampled_outputs([trace])
        or policy not in planned["policies"]
    ):
        raise IncompleteCheckpointException(
            rules.plan_maps.rule, checkpoint_target(found)
        )
    return [maps.Span(*r) for r in planned["policies"][policy]["ranges"]]


def map_chunks(wildcards):
    """The chunk outputs of one trace × policy's map."""
    chunks = maps.chunks(
        map_ranges(wildcards.trace, wildcards.policy), config["map_chunks"]
    )
    return [
        paths.map_chunk(wildcards.trace, wildcards.policy, c.first, c.last)
        for _, c in chunks
    ]


def map_chunk_index(wildcards):
    """A chunk's index within its range (a column of the map table)."""
    chunks = maps.chunks(
        map_ranges(wildcards.trace, wildcards.policy), config["map_chunks"]
    )
    wanted = maps.Span(int(wildcards.first), int(wildcards.last))
    return next((i for i, c in chunks if c == wanted), 0)


def mapped():
    """The traces whose maps run: none unless the config asks for maps (they take days), then
    those with a Stage A range, if the protocol has the map stage."""
    if not config["maps"] or PARAMS.maps is None:
        return []
    return [t for t in TRACES if sampled(t)]


def map_outputs():
    """Every mapped trace × policy's merged map."""
    return [paths.merged_map(t, p) for t in mapped() for p in POLICIES]


def trace_maps(wildcards):
    return [paths.merged_map(wildcards.trace, p) for p in POLICIES]


def published_files():
    return sorted(str(p) for p in PUBLISHED.glob("*.csv"))


def protocol_render():
    return paths.protocol_render(PROTOCOL.version)


FIGURES = ("cliffs", "overhead")
FIGURED = list(dict.fromkeys(t for t, _ in SERIES))  # the traces with a sampled series


def figure1_traces():
    """The traces of the study's Figure 1 with a sampled series under DTR."""
    return [t for t in paper.FIGURE1 if (t, paper.FIGURE1_POLICY) in SERIES]


def figure1_baselines():
    return [paths.baseline(t) for t in figure1_traces()]


def figure1_option():
    return " ".join(f"--baseline {path}" for path in figure1_baselines())


def figure_outputs():
    """Every figure's PDF: per trace, per trace × policy (zooms), and Figure 1 if it has a
    trace."""
    return [
        *(paths.figure(kind, t) + ".pdf" for kind in FIGURES for t in FIGURED),
        *(paths.figure("zoom", t, p) + ".pdf" for t, p in SERIES),
        *([figure1() + ".pdf"] if figure1_traces() else []),
    ]


def figure1():
    return paths.figure("figure1", paper.FIGURE1_POLICY)


def all_outputs():
    return [
        paths.records_table(),
        *(paths.table(name, "md") for name in paths.TABLES),
        paths.audit_report("md"),
        protocol_render(),
        *figure_outputs(),
        *series_outputs(paths.EXPLANATIONS),
        *map_targets(),
        *noise_targets(),
    ]


def noise_series():
    """The mapped traces generated by log-normal cost noise from another mapped trace."""
    found = noise.perturbations(SETTINGS.entries)
    return [p for p in found if p.name in mapped() and p.base in mapped()]


def noise_maps():
    """The maps the cost-noise table reads: the perturbed traces' and their originals'."""
    series = noise_series()
    traces = dict.fromkeys(t for p in series for t in (p.base, p.name))
    return [paths.merged_map(t, p) for t in traces for p in POLICIES]


def noise_targets():
    """The cost-noise study's table and figure, if the run maps perturbed traces."""
    if not noise_series():
        return []
    return [paths.table("noise", "md"), paths.figure("noise") + ".pdf"]


def map_targets():
    """The map stage's table and figures, if maps run."""
    if not mapped():
        return []
    return [
        paths.table("maps", "md"),
        *(paths.figure("maps", t) + ".pdf" for t in mapped()),
    ]


def simrd_option():
    return f"--simrd {SIMRD}" if SIMRD else ""
