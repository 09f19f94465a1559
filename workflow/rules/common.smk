# Small helpers shared by the stages: validated config, the protocol, the planned jobs.
import sys

from snakemake.utils import validate

from dtrholes import plan

# The project's command line, run by the interpreter running Snakemake (no PATH assumptions).
DTR_HOLES = f'"{sys.executable}" -m dtrholes'

validate(config, "../schemas/config.schema.yaml")

PROTOCOL = plan.read_protocol(config["protocol"])
TRACES = config["traces"] or [t for role in PROTOCOL["traces"].values() for t in role]
POLICIES = config["policies"] or list(PROTOCOL["policies"])


wildcard_constraints:
    trace="|".join(TRACES),
    policy="|".join(POLICIES),
    job=r"\d+",


def stage_a_jobs(trace):
    points = plan.stage_a_points(PROTOCOL, trace)
    return range(plan.job_count(points, config["points_per_job"]))


def stage_a_outputs():
    return [
        f"results/stage_a/{trace}/{policy}/job{job}.json"
        for trace in TRACES
        for policy in POLICIES
        for job in stage_a_jobs(trace)
    ]


def all_outputs():
    return ["results/records.parquet", "results/holes/holes.md"]
