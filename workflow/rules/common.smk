# Snakemake glue shared by the stages: the checked settings, wildcard constraints, checkpoint
# access and input functions. What the rules make comes from dtrholes.pipeline.targets, every
# path from dtrholes.core.paths (with no arguments, a path function gives its pattern).
import os
import sys

from snakemake.exceptions import IncompleteCheckpointException
from snakemake.io import checkpoint_target

from dtrholes.core import paths
from dtrholes.pipeline import stages, targets
from dtrholes.report.paper import published
from dtrholes.study import settings, simrd
from simulator import UserError

# The project's command line, run by the interpreter running Snakemake (no PATH assumptions).
# `exec`: the job is the child of this Snakemake process (no shell between them), and stops
# when a killed Snakemake leaves it behind.
DTR_HOLES = f'exec "{sys.executable}" -m dtrholes --exit-with-parent {os.getpid()}'

try:  # a mistake in the settings, the protocol or the trace sheet: one line, no traceback
    SETTINGS = settings.load(config)
except UserError as error:
    sys.exit(f"dtr-holes: {error}")
STUDY = (
    published.study_names()
)  # the study's own names: its Figure 1's traces and policy
TARGETS = targets.of(SETTINGS, config, STUDY.figure1_traces, STUDY.figure1_policy)
SIMRD = config["simrd_source"] or os.environ.get(simrd.SIMRD_ENV)
PUBLISHED = published.PUBLISHED  # the study's published results, as data


wildcard_constraints:
    trace="|".join(TARGETS.traces),
    policy="|".join(TARGETS.policies),
    job=r"\d+",
    first=r"\d+",
    last=r"\d+",
    stage="|".join(TARGETS.stages),
    digest="[0-9a-f]{16}",
    seed=r"\d+",


def refined(trace):
    """A trace's Stage B intervals, from its refinement plan (a checkpoint: the jobs that ask
    for them wait for it)."""
    found = checkpoints.plan_refinement.get(trace=trace).output[0]
    return targets.intervals(stages.read_output(found))


def trace_priority(wildcards):
    return targets.priority(config["costliest_first"], wildcards.trace)


def sweep_spec(wildcards):
    return TARGETS.spec(TARGETS.stages[wildcards.stage], wildcards.policy)


def edge_spec(wildcards):
    return TARGETS.spec(paths.EDGE, wildcards.policy)


def repeat_spec(wildcards):
    return TARGETS.spec(paths.REPEAT, wildcards.policy)


def explain_spec(wildcards):
    return TARGETS.spec(paths.EXPLAIN, wildcards.policy)


def map_spec(wildcards):
    return TARGETS.spec(paths.MAP, wildcards.policy)


def sweep_points(wildcards):
    """The job's points: a parameter, so that a job reruns exactly when its points change."""
    w = wildcards
    return TARGETS.job_points(w.stage, w.trace, w.policy, int(w.job), refined)


def refine_input(wildcards):
    """Stage B jobs come after the trace's plan, but a new plan reruns only the jobs whose
    points it changes (their `points` parameter), hence `ancient`."""
    if TARGETS.stages[wildcards.stage] != paths.STAGE_B:
        return []
    return ancient(paths.refinement_plan(wildcards.trace))


def ranking_input(wildcards):
    """A sampling job of a policy that ranks storages waits for the trace's ranking, computed
    once (else concurrent jobs of a trace each computed it, inside their first timed run).
    """
    return TARGETS.ranking(wildcards.trace, wildcards.policy)


def unrefined_outputs(wildcards):
    return TARGETS.unrefined_outputs(wildcards.trace)


def series_jobs(wildcards):
    """The outputs of one trace × policy's sampled series (every stage). Asks for the trace's
    refinement plan, so only this trace's jobs wait for it. (Rules that read them take no other
    input: while the plan is pending, Snakemake stands the plan in for all of their inputs.)
    """
    return TARGETS.sampled_outputs(refined, [wildcards.trace], [wildcards.policy])


def trace_series_jobs(wildcards):
    """The sampled series of every policy on a trace: what the map plan reads."""
    return TARGETS.sampled_outputs(refined, [wildcards.trace])


def all_sampled_outputs(wildcards):
    """Every sampling job's output, for the records table."""
    return TARGETS.sampled_outputs(refined)


def whole_option(wildcards):
    return "--whole" if wildcards.trace in config["map_whole"] else ""


def map_ranges(trace, policy):
    """The byte ranges of a trace × policy's map, from the trace's map plan. A plan made from
    other series than the current ones (a policy added since) is waited for like a missing
    one: its checkpoint reruns, since its inputs changed."""
    found = checkpoints.plan_maps.get(trace=trace).output[0]
    planned = stages.read_output(found)
    ranges = targets.map_ranges(
        planned, TARGETS.sampled_outputs(refined, [trace]), policy
    )
    if ranges is None:
        raise IncompleteCheckpointException(
            rules.plan_maps.rule, checkpoint_target(found)
        )
    return ranges


def map_chunks(wildcards):
    w = wildcards
    ranges = map_ranges(w.trace, w.policy)
    return targets.map_chunks(w.trace, w.policy, ranges, config["map_chunks"])


def map_chunk_index(wildcards):
    w = wildcards
    ranges = map_ranges(w.trace, w.policy)
    return targets.chunk_index(ranges, config["map_chunks"], int(w.first), int(w.last))


def figures_dir(wildcards, output):
    """The directory of a rule's figures (paths.figures()), which its command writes into."""
    return os.path.dirname(output[0])


def figure_stem(wildcards, output):
    """A figure's path without its extension (paths.figure), which its command writes."""
    return os.path.splitext(output[0])[0]


def trace_maps(wildcards):
    return TARGETS.trace_maps(wildcards.trace)
