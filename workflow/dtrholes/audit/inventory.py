"""The evidence table: every execution ever recorded, whether the results cite it, and why."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dtrholes.core import files, paths
from dtrholes.holes import maps
from dtrholes.pipeline import stages
from dtrholes.study import records
from simulator import UserError
from simulator.result import TIMEOUT

COLUMNS = (
    "run_id",
    "file",
    "status",
    "reason",
    "trace",
    "policy",
    "stage",
    "repeat",
    "budget",
    "ratio",
    "outcome",
    "protocol_version",
    "git_commit",
    "git_dirty",
    "lock_sha256",
    "cited_by",
)


@dataclass(frozen=True)
class RecordFile:
    """One file under the records directory: its record when valid, else what is wrong with it;
    and the sha256 of its bytes (None: unreadable)."""

    path: Path
    record: dict | None
    problem: str | None
    sha256: str | None = None

    @property
    def partial(self) -> bool:
        """A temporary file an interrupted write left behind (records are written by rename)."""
        return self.path.name.startswith(".")

    @property
    def canonical(self) -> bool:
        """A valid record in the file named after its run id."""
        return self.record is not None and self.path.stem == self.record["run_id"]


def scan(directory: Path) -> list[RecordFile]:
    """Every file under `directory`, valid records or not, in name order."""
    return [_read(p) for p in sorted(Path(directory).rglob("*")) if p.is_file()]


def _read(path: Path) -> RecordFile:
    if path.name.startswith("."):
        return RecordFile(path, None, "a partial file of an interrupted write")
    try:
        data = path.read_bytes()
        record = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return RecordFile(path, None, f"truncated or unreadable JSON ({exc})")
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        records.validate(record, path.name)
    except records.RecordError as exc:
        return RecordFile(path, None, f"invalid against the record schema ({exc.found})", sha256)
    return RecordFile(path, record, None, sha256)


@dataclass(frozen=True)
class Inventory:
    """What a results directory holds: its record files, the current job outputs and merged
    maps with the run ids they list and the sha256 they state of each listed record file, and
    the rendered protocols (`rendered`: the one the tables were made under)."""

    results: Path
    files: list[RecordFile]
    records: dict[str, dict]  # the valid records in files named after their run ids
    outputs: dict[str, list[str]]  # job output (relative path) -> its run ids
    unreadable: dict[str, str]  # job output -> why it cannot be read
    rendered: dict
    renders: dict[str, dict]
    maps: dict[str, list[str]] = field(default_factory=dict)  # merged map -> its tiles' run ids
    # job output or merged map -> run id -> its record file's sha256 (None: not stated)
    sha256: dict[str, dict[str, str] | None] = field(default_factory=dict)

    def listed(self, rels: list[str]) -> list[dict]:
        """The existing records the given job outputs list, in order."""
        return [self.records[i] for rel in rels for i in self.outputs[rel] if i in self.records]

    def current(self) -> list[dict]:
        """The existing records the current job outputs list, as the records table has them."""
        return self.listed(list(self.outputs))

    def cited(self) -> dict[str, list[str]]:
        """Run id -> the current job outputs that list it."""
        found: dict[str, list[str]] = defaultdict(list)
        for rel, run_ids in [*self.outputs.items(), *self.maps.items()]:
            for run_id in run_ids:
                found[run_id].append(rel)
        return found


def inventory(results: Path, rendered: Path | None = None) -> Inventory:
    """Read a results directory; `rendered` defaults to the latest rendered protocol."""
    renders = _renders(paths.protocol_renders(results))
    files = scan(paths.records(results))
    canonical = {f.record["run_id"]: f.record for f in files if f.canonical}
    outputs, unreadable, stated = _outputs(results)
    current = stages.read_output(rendered) if rendered else latest(renders)
    found = Inventory(results, files, canonical, outputs, unreadable, current, renders)
    mapped, map_sha256 = map_runs(results)
    return dataclasses.replace(found, maps=mapped, sha256={**stated, **map_sha256})


def map_runs(results: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, str] | None]]:
    """Each merged map (relative path) -> the run ids of its tiles, and -> the sha256 it
    states of their record files; unreadable maps are the audit's maps check's to report."""
    runs, stated = {}, {}
    for path in sorted(results.glob(paths.MAP_GLOB)):
        rel = str(path.relative_to(results))
        try:
            runs[rel], stated[rel] = maps.listing(path)
        except (OSError, KeyError, TypeError, ValueError, pa.ArrowException):
            continue
    return runs, stated


def _renders(directory: Path) -> dict[str, dict]:
    found = {}
    for path in sorted(directory.glob("*.json")):
        try:
            found[path.stem] = stages.read_output(path)
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(str(path), "a rendered protocol (JSON)", str(exc)) from None
    return found


def latest(renders: dict[str, dict]) -> dict:
    """The rendered protocol whose history extends every other's."""
    if not renders:
        raise UserError(paths.protocol_renders(), "at least one rendered protocol", "none")
    ordered = sorted(renders.values(), key=lambda r: len(r["history"]))
    ids = [a["id"] for a in ordered[-1]["history"]]
    if any([a["id"] for a in r["history"]] != ids[: len(r["history"])] for r in ordered):
        raise UserError(paths.protocol_renders(), "one latest rendered protocol", "diverging ones")
    return ordered[-1]


def job_outputs(results: Path) -> list[str]:
    """The job outputs the records table was gathered from, else every one on disk."""
    try:
        metadata = pq.read_schema(paths.records_table(results)).metadata or {}
    except (OSError, pa.ArrowException):
        metadata = {}
    if records.JOBS_KEY in metadata:
        return json.loads(metadata[records.JOBS_KEY])
    found = (p for g in paths.JOB_GLOBS for p in results.glob(g))
    return sorted(str(p.relative_to(results)) for p in found)


def _outputs(results: Path) -> tuple[dict[str, list[str]], dict[str, str], dict]:
    """Each job output's run ids, why those that cannot be read cannot, and the sha256 each
    states of its records' files."""
    outputs, unreadable, stated = {}, {}, {}
    for rel in job_outputs(results):
        try:
            output = stages.read_output(results / rel)
            outputs[rel] = list(output["run_ids"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            unreadable[rel] = f"unreadable ({exc})"
            continue
        stated[rel] = output.get(records.SHA256_KEY)
    return outputs, unreadable, stated


def rows(files: list[RecordFile], cited: dict[str, list[str]], version: str) -> list[dict]:
    """One evidence row per file, and one per listed run id without a record file;
    `cited`: run id -> the current job outputs that list it."""
    found = [_row(f, cited, version) for f in files]
    on_file = {f.record["run_id"] for f in files if f.canonical}
    return found + [_missing(run_id, cited[run_id]) for run_id in sorted(set(cited) - on_file)]


def _missing(run_id: str, citing: list[str]) -> dict:
    row = dict.fromkeys(COLUMNS, None)
    reason = "listed by a current job output, but no valid record file"
    return {
        **row,
        "run_id": run_id,
        "status": "missing",
        "reason": reason,
        "cited_by": ";".join(citing),
    }


def _row(f: RecordFile, cited: dict[str, list[str]], version: str) -> dict:
    record = f.record or {}
    run_id = record.get("run_id", f.path.name.lstrip(".").split(".")[0])
    status, reason = _status(f, cited.get(run_id, []), version)
    result = record.get("result") or {}
    return {
        "run_id": run_id,
        "file": f.path.name,
        "status": status,
        "reason": reason,
        "trace": record.get("trace", {}).get("name"),
        "policy": record.get("policy", {}).get("name"),
        "stage": record.get("stage"),
        "repeat": record.get("repeat"),
        "budget": record.get("budget"),
        "ratio": record.get("ratio"),
        "outcome": result.get("outcome") or (TIMEOUT if record else None),
        "protocol_version": record.get("protocol", {}).get("version"),
        "git_commit": record.get("code", {}).get("git_commit"),
        "git_dirty": record.get("code", {}).get("git_dirty"),
        "lock_sha256": record.get("code", {}).get("lock_sha256"),
        "cited_by": ";".join(cited.get(run_id, [])) if f.canonical else "",
    }


def _status(f: RecordFile, citing: list[str], version: str) -> tuple[str, str]:
    if f.record is None:
        return "excluded", f.problem or ""
    if not f.canonical:
        return "excluded", f"a copy of record {f.record['run_id']} under another name"
    if citing:
        timeout = f.record["status"] == TIMEOUT
        return "current", "timed out: unresolved" if timeout else ""
    recorded = f.record["protocol"]["version"]
    if recorded != version:
        return "superseded", f"run under protocol version {recorded}, current is {version}"
    return "superseded", "no current job output lists it (an older plan)"


def write_csv(table: list[dict], path: Path) -> None:
    with files.atomic(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(table)
