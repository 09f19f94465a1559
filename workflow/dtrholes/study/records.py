"""Execution records: one schema-validated JSON file per simulation run, append-only."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import fastjsonschema
import jsonschema
import pyarrow as pa

from dtrholes.core import files, paths, provenance
from dtrholes.core.samples import COMPLETE
from simulator import Result, UserError, get_policy
from simulator.result import TIMEOUT

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "record.schema.json"


class RecordError(UserError):
    """A record file that is unreadable, invalid against the schema, or already written."""


@dataclass(frozen=True)
class Request:
    """What one run is asked to do; the hash of what defines the execution is the run id.

    The protocol version and amendments only label the record: an identical execution asked
    for under a later protocol version is the same run, and its record is reused.
    """

    trace: str
    trace_sha256: str
    policy: str
    params: tuple[tuple[str, float], ...]
    budget: int
    ratio: float | None = None
    overhead_cap: float | None = None
    wall_clock_s: float | None = None
    stage: str = paths.ADHOC
    repeat: int = 0
    protocol_version: str | None = None
    amendments: tuple[str, ...] = ()
    policy_source: str | None = None  # file.py:name of a policy from a file, else None
    policy_sha256: str | None = None  # of that file: its content defines the execution
    trace_origin: str | None = None  # an own trace's file and provenance (JSON), else None

    @property
    def policy_ref(self) -> str:
        """What `simulator.get_policy` resolves: the source of a file policy, else the name."""
        return self.policy_source or self.policy

    @property
    def run_id(self) -> str:
        defining = asdict(self)
        del defining["protocol_version"], defining["amendments"], defining["policy_source"]
        del defining["trace_origin"]  # its bytes, which define the execution, are the sha256
        if self.policy_sha256 is None:  # built-ins keep the run ids they always had
            del defining["policy_sha256"]
        canonical = json.dumps(defining, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Usage:
    """What a run cost."""

    started_utc: str
    ended_utc: str
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    resumed_at: int = 0  # the schedule command a map run's replay continued from (0: start)
    pid: int | None = None  # the process that ran it (None: a timeout, killed unanswered)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def make_record(request: Request, usage: Usage, result: Result | None) -> dict:
    """The record of one run; `result` None means the wall-clock guard stopped it."""
    return {
        "record_version": 1,
        "run_id": request.run_id,
        "trace": {
            "name": request.trace,
            "sha256": request.trace_sha256,
            **(json.loads(request.trace_origin) if request.trace_origin else {}),
        },
        "policy": _policy(request),
        "budget": request.budget,
        "ratio": request.ratio,
        "overhead_cap": request.overhead_cap,
        "wall_clock_s": request.wall_clock_s,
        "stage": request.stage,
        "repeat": request.repeat,
        "protocol": {"version": request.protocol_version, "amendments": list(request.amendments)},
        "code": provenance.code(),
        "environment": provenance.environment(),
        **asdict(usage),
        "status": COMPLETE if result is not None else TIMEOUT,
        "result": result.to_dict() if result is not None else None,
    }


def _policy(request: Request) -> dict:
    named = {"name": request.policy, "params": dict(request.params)}
    if request.policy_source is None:
        return named
    return {**named, "source": request.policy_source, "sha256": request.policy_sha256}


@cache
def _schema() -> dict:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_schema())


@cache
def _accepts() -> Callable[[dict], object]:
    """The schema compiled to Python code: about 30 times faster than the validator on a
    record. It may reject what the validator accepts (it checks formats), so it only ever
    accepts; the validator's verdict and message stand for every record it rejects."""
    return fastjsonschema.compile(_schema())


def validate(record: dict, where: str) -> None:
    try:
        _accepts()(record)
        return
    except fastjsonschema.JsonSchemaException:
        pass
    error = jsonschema.exceptions.best_match(_validator().iter_errors(record))
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise RecordError(
            f"{where}: {path}", "a record valid against record.schema.json", error.message
        )


def record_path(directory: Path, run_id: str) -> Path:
    return Path(directory) / f"{run_id}.json"


def write_record(record: dict, directory: Path) -> Path:
    """Validate and write atomically; an existing record is never overwritten."""
    path = record_path(directory, record["run_id"])
    validate(record, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, sort_keys=True, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        files.share(tmp)
        os.link(tmp, path)  # fails if the record exists: records are append-only
    except FileExistsError:
        raise RecordError(str(path), "a new record", "a record with this run id") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


SHA256_KEY = "record_sha256"
"""A job output's (or map's) key: the sha256 of each record file it lists, by run id."""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def checksums(directory: Path, run_ids: list[str]) -> dict[str, str]:
    """Each listed record file's sha256, by run id in name order: what a job output states of
    the records it wrote or read, so that an edit of any of them shows."""
    return {run_id: file_sha256(record_path(directory, run_id)) for run_id in sorted(set(run_ids))}


def read_record(path: Path) -> dict:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(str(path), "a readable JSON record", str(exc)) from None
    validate(record, str(path))
    if Path(path).stem != record["run_id"]:
        raise RecordError(str(path), f"a file named after its run id {record['run_id']}", "another")
    return record


def read_records(directory: Path) -> list[dict]:
    """Every record under `directory`, in file-name order; the first invalid one is an error."""
    return [read_record(p) for p in sorted(Path(directory).rglob("*.json"))]


_RESULT_COLUMNS = (
    "outcome",
    "clock",
    "overhead",
    "evictions",
    "eviction_seq_sha256",
    "max_depth",
    "peak_pinned",
    "peak_pinned_depth",
    "budget_lo",
    "budget_hi",
)
_COLUMNS = {
    "run_id": pa.string(),
    "trace": pa.string(),
    "trace_sha256": pa.string(),
    "policy": pa.string(),
    "params": pa.string(),
    "budget": pa.int64(),
    "ratio": pa.float64(),
    "overhead_cap": pa.float64(),
    "stage": pa.string(),
    "repeat": pa.int64(),
    "protocol_version": pa.string(),
    "amendments": pa.list_(pa.string()),
    "status": pa.string(),
    "outcome": pa.string(),
    "clock": pa.int64(),
    "overhead": pa.float64(),
    "evictions": pa.int64(),
    "eviction_seq_sha256": pa.string(),
    "max_depth": pa.int64(),
    "peak_pinned": pa.int64(),
    "peak_pinned_depth": pa.int64(),
    "budget_lo": pa.int64(),
    "budget_hi": pa.int64(),
    "wall_s": pa.float64(),
}


def request_of(record: dict) -> Request:
    """The request a record answers, as the runner made it (its run id is the record's)."""
    policy = record["policy"]
    return Request(
        trace=record["trace"]["name"],
        trace_sha256=record["trace"]["sha256"],
        policy=policy["name"],
        params=get_policy(policy.get("source", policy["name"])).resolve(policy["params"]),
        budget=record["budget"],
        ratio=record["ratio"],
        overhead_cap=record["overhead_cap"],
        wall_clock_s=record["wall_clock_s"],
        stage=record["stage"],
        repeat=record["repeat"],
        protocol_version=record["protocol"]["version"],
        amendments=tuple(record["protocol"]["amendments"]),
        policy_source=policy.get("source"),
        policy_sha256=policy.get("sha256"),
    )


def row(record: dict) -> dict:
    """A record's row in the records table."""
    result = record["result"] or {}
    return {
        "run_id": record["run_id"],
        "trace": record["trace"]["name"],
        "trace_sha256": record["trace"]["sha256"],
        "policy": record["policy"]["name"],
        "params": json.dumps(record["policy"]["params"], sort_keys=True),
        "budget": record["budget"],
        "ratio": record["ratio"],
        "overhead_cap": record["overhead_cap"],
        "stage": record["stage"],
        "repeat": record["repeat"],
        "protocol_version": record["protocol"]["version"],
        "amendments": record["protocol"]["amendments"],
        "status": record["status"],
        "wall_s": record["wall_s"],
        **{key: result.get(key) for key in _RESULT_COLUMNS},
    }


JOBS_KEY = b"dtr_holes.job_outputs"
"""Records-table metadata: the job outputs (relative to the results directory) it tabulates."""


def table(listed: list[dict], jobs: list[str] | None = None) -> pa.Table:
    """The records table of `listed`, naming the job outputs that list them."""
    metadata = {JOBS_KEY: json.dumps(jobs).encode()} if jobs is not None else None
    schema = pa.schema([pa.field(k, t) for k, t in _COLUMNS.items()], metadata=metadata)
    return pa.Table.from_pylist([row(r) for r in listed], schema=schema)


def gather(listed: list[dict], parquet: Path, jobs: list[str] | None = None) -> int:
    """Tabulate records into one Parquet file; returns the row count."""
    files.write_table(table(listed, jobs), parquet)
    return len(listed)
