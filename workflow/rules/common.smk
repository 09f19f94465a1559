# Small helpers shared by the stages: validated config, the protocol, the planned jobs.
import sys

from snakemake.utils import validate

from dtrholes import fetch, plan

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
    stage="a|c",


SHEET = [entry.name for entry in fetch.read_sheet(config["trace_sheet"])]


def stage_jobs(stage, trace):
    points = plan.stage_points(PROTOCOL, stage, trace, SHEET.index(trace))
    return range(plan.job_count(points, config["points_per_job"]))


def sweep_outputs():
    return [
        f"results/stage_{stage.lower()}/{trace}/{policy}/job{job}.json"
        for stage in ("A", "C")
        for trace in TRACES
        for policy in POLICIES
        for job in stage_jobs(stage, trace)
    ]


def all_outputs():
    return ["results/records.parquet", "results/holes/holes.md"]
