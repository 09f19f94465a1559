"""Cross-check against unmodified simrd: locate its source, run it in a fresh process on a trace."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath

import pyarrow as pa

from dtrholes.core import files
from dtrholes.study.parameters import Parameters
from dtrholes.traces import fetch
from simulator.errors import UserError
from simulator.policies import POLICIES, get_policy
from simulator.result import OK, TIMEOUT
from simulator.trace import read_trace

SIMRD_ENV = "DTR_HOLES_SIMRD"
"""Names the simrd source (checkout directory or archive) for tests and callers that want one."""
SIMRD_COMMIT = "eff53cc4804cc7d6246a6e5086861ce2b846f62b"
"""The dtr-prototype commit whose simrd the reference results and this cross-check are for."""
DRIVER = Path(__file__).with_name("simrd_driver.py")
EXPECTED_SOURCE = (
    "a checkout of github.com/uwsampl/dtr-prototype (or its simrd/ folder), "
    "or a .zip/.tar.gz archive of one"
)
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")
RESULT_KEYS = (
    "outcome",
    "clock",
    "evictions",
    "eviction_seq_sha256",
    "remat_compute",
    "model_compute",
    "peak_memory",
    "heuristic_evals",
    "wall_s",
    "simrd_file",
)
# What a simrd heuristic class is called for each of our policies that reproduces one.
SIMRD_HEURISTICS = {p.name: p.simrd_name for p in POLICIES.values() if p.simrd_name}


def _package_root(parts: tuple[str, ...]) -> int | None:
    """How many leading parts name the sys.path entry, if `parts` is a simrd/__init__.py."""
    if len(parts) >= 2 and parts[-2:] == ("simrd", "__init__.py"):
        return len(parts) - 2
    return None


def _simrd_in_dir(path: Path) -> Path | None:
    for root in (path, path / "simrd"):
        if (root / "simrd" / "__init__.py").is_file():
            return root
    return None


def _simrd_in_members(names: list[str]) -> PurePosixPath | None:
    """The shallowest archive folder that holds the simrd package, as a relative path."""
    found = []
    for name in names:
        parts = PurePosixPath(name).parts
        depth = _package_root(parts)
        if depth is not None and depth <= 3:
            found.append(PurePosixPath(*parts[:depth]))
    return min(found, key=lambda p: len(p.parts), default=None)


def _members(archive: Path) -> list[str]:
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                return z.namelist()
        with tarfile.open(archive, "r:gz") as t:
            return t.getnames()
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise UserError(str(archive), EXPECTED_SOURCE, f"an unreadable archive ({exc})") from None


def _extract(archive: Path, dest: Path) -> None:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(dest)
    else:
        with tarfile.open(archive, "r:gz") as t:
            t.extractall(dest, filter="data")


def _extract_once(archive: Path, work_dir: Path) -> Path:
    """Extract `archive` into work_dir under a name tied to its contents; reuse it if present."""
    target = work_dir / f"simrd-{fetch.sha256_file(archive)[:16]}"
    if target.is_dir():
        return target
    work_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=work_dir, prefix=".simrd-", suffix=".part"))
    try:
        _extract(archive, tmp)
        files.share(tmp, directory=True)
        os.rename(tmp, target)
    except OSError:
        if not target.is_dir():  # a concurrent extraction that won the rename is fine
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def locate_simrd(spec: str | Path, work_dir: Path) -> Path:
    """The directory to put on sys.path so that `import simrd` imports the configured source.

    `spec` is a checkout (repository root or its simrd/ folder) or a .zip/.tar.gz archive of one,
    which is extracted once into `work_dir`.
    """
    path = Path(spec)
    if path.is_dir():
        root = _simrd_in_dir(path)
        if root is None:
            raise UserError(str(path), EXPECTED_SOURCE, "a directory without simrd/__init__.py")
        return root.resolve()
    if not path.is_file():
        raise UserError(str(path), EXPECTED_SOURCE, "no such file or directory")
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise UserError(str(path), EXPECTED_SOURCE, "a file that is not a .zip or .tar.gz")
    inside = _simrd_in_members(_members(path))
    if inside is None:
        raise UserError(str(path), EXPECTED_SOURCE, "an archive without simrd/__init__.py")
    return (_extract_once(path, Path(work_dir)) / inside).resolve()


def simrd_heuristic(policy: str) -> str:
    """simrd's heuristic class name for one of our policies (simrd's class names pass through)."""
    chosen = get_policy(policy)
    if chosen.simrd_name is None:
        known = ", ".join(SIMRD_HEURISTICS)
        raise UserError(f"policy {policy}", f"a policy simrd implements ({known})", "none")
    return chosen.simrd_name


def remat_limit(
    trace_log: Path, overhead_cap: float | None, model_compute: int | None = None
) -> float:
    """simrd's remat_limit for our overhead cap: model compute × (cap − 1), as simulate() uses."""
    if overhead_cap is None:
        return math.inf
    if not (isinstance(overhead_cap, int | float) and overhead_cap >= 1):
        raise UserError("overhead cap", "a number >= 1", repr(overhead_cap))
    if model_compute is None:
        model_compute = read_trace(str(trace_log)).model_compute
    return model_compute * (overhead_cap - 1)


def _driver_command(trace_log: Path, budget: int, heuristic: str, limit: float) -> list[str]:
    limit_arg = "inf" if math.isinf(limit) else repr(float(limit))
    # -P: the driver's own folder must not shadow anything simrd imports.
    return [
        sys.executable,
        "-P",
        str(DRIVER),
        str(trace_log),
        str(int(budget)),
        heuristic,
        limit_arg,
    ]


def _parsed(stdout: str) -> dict | None:
    lines = stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return report if isinstance(report, dict) and set(report) == set(RESULT_KEYS) else None


def _report(source: Path, proc: subprocess.CompletedProcess) -> dict:
    report = _parsed(proc.stdout) if proc.returncode == 0 else None
    if report is None:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        found = f"exit status {proc.returncode}: {last}"
        raise UserError(f"simrd at {source}", "a run that reports one JSON line", found)
    return report


def run_simrd(
    source: Path,
    trace_log: Path,
    budget: int,
    heuristic: str = "dtr",
    overhead_cap: float | None = None,
    model_compute: int | None = None,
    timeout_s: float = 1200,
) -> dict:
    """Replay `trace_log` under `budget` with unmodified simrd from `source`, in a fresh process.

    `source` is a directory from locate_simrd. simrd's parser, RuntimeV2EagerOptimized and
    heuristic do all the work; only the evicted storages' names are recorded on the way out.
    `overhead_cap` becomes simrd's remat_limit (`model_compute` defaults to the trace's). Returns
    outcome (ok / oom / thrashed / timeout), clock, evictions, eviction_seq_sha256,
    remat_compute, model_compute, peak_memory, heuristic_evals, wall_s (simrd's replay; for a
    timeout, the time waited) and simrd_file (the simrd package that ran).
    """
    limit = remat_limit(trace_log, overhead_cap, model_compute)
    command = _driver_command(trace_log, budget, simrd_heuristic(heuristic), limit)
    env = {**os.environ, "PYTHONPATH": str(source), "PYTHONNOUSERSITE": "1"}
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return _timeout(time.perf_counter() - start)
    return _report(source, proc)


def _timeout(waited: float) -> dict:
    return {**dict.fromkeys(RESULT_KEYS), "outcome": TIMEOUT, "wall_s": waited}


def trace_log(
    name: str, data_dir: Path, archive: str | None, sheet: Path, out_dir: Path | None = None
) -> Path:
    """The raw .log of trace `name`, written once (verified: from the archive in data_dir, your
    own file, or generated) into `out_dir` (default data_dir/logs). A path ending in .log is
    returned as it is.
    """
    if name.endswith(".log"):
        return Path(name)
    entry = fetch.find_entry(name, sheet)
    target = Path(out_dir or Path(data_dir) / "logs") / f"{entry.name}-{entry.sha256[:16]}.log"
    if target.is_file() and fetch.sha256_file(target) == entry.sha256:
        return target
    data, _ = fetch.trace_bytes(entry, Path(data_dir), archive, sheet=sheet)
    files.write_bytes(target, data)
    return target


COMPARED = ("outcome", "clock", "evictions", "eviction_seq_sha256")


def check_point(point: dict, source: Path | None, log: Path | None, cache_dir: Path) -> dict:
    """One confirmation point replayed by simrd (once: the answer is cached under `cache_dir`)
    and compared with our record of it; status agrees, DISAGREES, timeout or not run."""
    if source is None or log is None:
        return {**point, "status": "not run", "simrd": None}
    key = json.dumps(
        [str(source), point["trace_sha256"], point["budget"], point["policy"], point["cap"]]
    )
    cached = cache_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    if cached.is_file():
        simrd = json.loads(cached.read_text(encoding="utf-8"))
    else:
        simrd = run_simrd(
            source, log, point["budget"], point["policy"], point["cap"], point["model_compute"]
        )
        files.write_bytes(cached, json.dumps(simrd, sort_keys=True).encode())
    simrd = {**simrd, "overhead": overhead(simrd)}
    if simrd["outcome"] == TIMEOUT:
        status = TIMEOUT
    else:
        same = all(simrd[k] == point["ours"][k] for k in COMPARED)
        status = "agrees" if same else "DISAGREES"
    return {**point, "status": status, "simrd": simrd}


SCHEMA = pa.schema(
    [
        ("trace", pa.string()),
        ("policy", pa.string()),
        ("budget", pa.int64()),
        ("ratio", pa.float64()),
        ("status", pa.string()),
        ("outcome", pa.string()),
        ("simrd_outcome", pa.string()),
        ("clock", pa.int64()),
        ("simrd_clock", pa.int64()),
        ("evictions", pa.int64()),
        ("simrd_evictions", pa.int64()),
        ("simrd_overhead", pa.float64()),  # of a completed run: (model + remat) / model compute
        ("simrd_wall_s", pa.float64()),
        ("protocol_version", pa.string()),  # of our record of the point
    ]
)


def policies(rendered: dict) -> list[str]:
    """The policies whose region points a rendered protocol has simrd replay."""
    confirmation = Parameters.from_dict(rendered["parameters"]).confirmation
    return list(confirmation.simrd or ()) if confirmation else []


def table_rows(checked: list[dict]) -> list[dict]:
    """Flat rows of checked points: our fields beside simrd's."""
    rows = []
    for c in checked:
        simrd = c["simrd"] or {}
        rows.append(
            {
                **{k: c[k] for k in ("trace", "policy", "budget", "ratio", "status")},
                "protocol_version": c["protocol_version"],
                **{k: c["ours"][k] for k in ("outcome", "clock", "evictions")},
                **{f"simrd_{k}": simrd.get(k) for k in ("outcome", "clock", "evictions")},
                "simrd_overhead": simrd.get("overhead"),
                "simrd_wall_s": simrd.get("wall_s"),
            }
        )
    return rows


def overhead(simrd: dict) -> float | None:
    """A completed simrd run's overhead, computed as the simulator computes its own."""
    if simrd.get("outcome") != OK:
        return None
    return (simrd["model_compute"] + simrd["remat_compute"]) / simrd["model_compute"]


def markdown(rows: list[dict], source: str | None) -> str:
    if source is None:
        head = "Unmodified simrd: **not run** (no simrd source configured)."
    else:
        agreeing = sum(r["status"] == "agrees" for r in rows)
        head = f"Unmodified simrd from `{source}`: {agreeing} of {len(rows)} points agree."
    lines = [
        head,
        "",
        "| trace | policy | budget (bytes) | ratio | ours | simrd | status | our protocol |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ours = f"{r['outcome']}, clock {r['clock']:,}, {r['evictions']:,} evictions"
        theirs = "–"
        if r["simrd_outcome"] not in (None, TIMEOUT):
            theirs = (
                f"{r['simrd_outcome']}, clock {r['simrd_clock']:,},"
                f" {r['simrd_evictions']:,} evictions"
            )
        lines.append(
            f"| {r['trace']} | {r['policy']} | {r['budget']:,} | {r['ratio']} | {ours} "
            f"| {theirs} | {r['status']} | {r['protocol_version']} |"
        )
    return "\n".join(lines) + "\n"
