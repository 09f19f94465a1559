"""The records check: valid, unique record files, each listed one on file with its stated bytes."""

from __future__ import annotations

from collections import Counter

from dtrholes.audit import inventory
from dtrholes.audit.context import Check, Context, Failure
from dtrholes.core import paths
from dtrholes.study import records
from simulator import UserError

# The rule writing each kind of job output (a merged map states what its chunks state).
REBUILT_BY = {
    paths.SAMPLES: "sweep_stage",
    paths.EDGES: "find_edges",
    paths.REPEATS: "repeat_regions",
    paths.MAPS: "map_chunk",
}


def check_records(ctx: Context) -> Check:
    failures = [x for f in ctx.inv.files for x in _file_failures(f)]
    failures += _duplicates(ctx.inv.files)
    for rel, run_ids in ctx.inv.outputs.items():
        failures += _listed_failures(ctx, rel, run_ids)
    digests = {f.record["run_id"]: f.sha256 for f in ctx.inv.files if f.canonical}
    for rel, run_ids in [*ctx.inv.outputs.items(), *ctx.inv.maps.items()]:
        failures += _checksum_failures(rel, run_ids, ctx.inv.sha256.get(rel), digests)
    partial = sum(f.partial for f in ctx.inv.files)
    notes = (f"{partial} partial files of interrupted writes (no record)",) if partial else ()
    return Check("records", len(ctx.inv.files), tuple(failures), notes)


def _file_failures(f: inventory.RecordFile) -> list[Failure]:
    if f.partial:
        return []
    if f.record is None:
        return [Failure("records", f"record {f.path.stem}", f"{f.path.name}: {f.problem}")]
    run_id = f.record["run_id"]
    if not f.canonical:
        found = f"file {f.path.name} holds record {run_id}: a duplicate under another name"
        return [Failure("records", f"record {run_id}", found)]
    problem = _request_problem(f.record)
    return [Failure("records", f"record {run_id}", problem)] if problem else []


def _request_problem(record: dict) -> str | None:
    """Why a record is not the record of its own request, if it is not."""
    try:
        request = records.request_of(record)
    except UserError as exc:
        return f"its request is invalid ({exc})"
    if request.run_id != record["run_id"]:
        return f"its run id is not the hash of its request (that is {request.run_id})"
    result = record["result"]
    if result is None:
        return None
    asked = {
        "trace_sha256": request.trace_sha256,
        "policy": request.policy,
        "params": dict(request.params),
        "budget": request.budget,
        "overhead_cap": request.overhead_cap,
    }
    wrong = [k for k, v in asked.items() if result[k] != v]
    return f"its result answers another request ({', '.join(wrong)})" if wrong else None


def _duplicates(files: list[inventory.RecordFile]) -> list[Failure]:
    held = Counter(f.record["run_id"] for f in files if f.record is not None)
    return [
        Failure("records", f"record {run_id}", f"duplicate run id: {n} files hold it")
        for run_id, n in sorted(held.items())
        if n > 1
    ]


def _listed_failures(ctx: Context, rel: str, run_ids: list[str]) -> list[Failure]:
    listing = paths.listing(rel)
    failures = []
    for run_id in run_ids:
        record = ctx.inv.records.get(run_id)
        if record is None:
            failures.append(Failure("records", f"record {run_id}", f"listed by {rel}, missing"))
            continue
        found = (record["stage"], record["trace"]["name"], record["policy"]["name"])
        if found != (listing.stage, listing.trace, listing.policy):
            message = f"listed by {rel} but a {'/'.join(found)} run"
            failures.append(Failure("records", f"record {run_id}", message))
    return failures


def _checksum_failures(
    rel: str, run_ids: list[str], stated: dict[str, str] | None, digests: dict[str, str]
) -> list[Failure]:
    """Each listed record file whose bytes are not those the job output states (a missing
    one is reported as missing)."""
    if stated is None:
        rule = REBUILT_BY[paths.listing(rel).kind]
        message = (
            "written before job outputs stated their records' sha256: rebuild it from its"
            f" records (none is rerun) with `snakemake --forcerun {rule}`"
        )
        return [Failure("records", rel, message)]
    failures = []
    for run_id in dict.fromkeys(run_ids):
        found, wanted = digests.get(run_id), stated.get(run_id)
        if found is not None and found != wanted:
            message = (
                f"file records/{run_id}.json has sha256 {found}, {rel} states"
                f" {wanted or 'none'}: edited after the job wrote it"
            )
            failures.append(Failure("records", f"record {run_id}", message))
    return failures
