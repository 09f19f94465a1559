"""The provenance check: trace bytes and checksums, protocol versions and code versions on file."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict

from dtrholes.audit.context import Check, Context, Failure, origin_of, trace_of
from dtrholes.core import paths
from dtrholes.study import records
from simulator import UserError, get_policy


def check_provenance(ctx: Context) -> Check:
    failures = [x for r in ctx.inv.records.values() for x in _record_provenance(ctx, r)]
    users: dict[str, list[str]] = defaultdict(list)
    for r in ctx.inv.records.values():
        users[r["trace"]["name"]].append(r["run_id"])
    for name, run_ids in sorted(users.items()):
        problem = _trace_problem(ctx, name)
        if problem:
            where = f"record {run_ids[0]} (and {len(run_ids) - 1} more of trace {name})"
            failures.append(Failure("provenance", where, problem))
    failures += _shared_processes(ctx) + _policy_files(ctx)
    return Check("provenance", len(ctx.inv.records), tuple(failures), _code_notes(ctx))


def _policy_files(ctx: Context) -> list[Failure]:
    """The records the results cite that ran a policy from a file name that file's sha256 now:
    an edited file leaves its older records on file, but not in the results."""
    cited = ctx.inv.cited()
    using: dict[tuple[str, str], list[str]] = defaultdict(list)
    for run_id in cited:
        policy = ctx.inv.records.get(run_id, {}).get("policy", {})
        if "source" in policy:
            using[policy["source"], policy["sha256"]].append(run_id)
    failures = []
    for (source, sha), run_ids in sorted(using.items()):
        try:
            now = get_policy(source).source_sha256
        except UserError as error:
            now = f"unreadable ({error})"
        if now != sha:
            where = f"record {run_ids[0]} (and {len(run_ids) - 1} more of {source})"
            message = f"policy file {source} has sha256 {now}, the records {sha}"
            failures.append(Failure("provenance", where, message))
    return failures


def _shared_processes(ctx: Context) -> list[Failure]:
    """Repeats of one point that name the same process (of those recording it): each must
    have run in a new one."""
    first: dict[tuple, str] = {}
    failures = []
    for r in ctx.inv.records.values():
        if r["stage"] != paths.REPEAT or r.get("pid") is None:
            continue
        try:
            point = dataclasses.replace(records.request_of(r), repeat=0).run_id
        except UserError:
            continue  # the records check reports its request
        other = first.setdefault((point, r["environment"]["host"], r["pid"]), r["run_id"])
        if other != r["run_id"]:
            message = f"a repeat that ran in the process of repeat {other}, not a new one"
            failures.append(Failure("provenance", f"record {r['run_id']}", message))
    return failures


def _record_provenance(ctx: Context, record: dict) -> list[Failure]:
    problems = []
    name, sha = record["trace"]["name"], record["trace"]["sha256"]
    entry = ctx.sheet.get(name)
    if entry is None or entry.sha256 != sha:
        stated = entry.sha256 if entry else "no such trace"
        problems.append(f"trace {name} sha256 {sha} is not the trace sheet's ({stated})")
    elif not isinstance(trace_of(ctx, name), str):
        told = {k: record["trace"][k] for k in ("file", "provenance") if k in record["trace"]}
        if told != (origin_of(ctx, name) or {}):
            problems.append(f"trace {name}'s origin {told} is not its file's")
    version = record["protocol"]["version"]
    render = ctx.inv.renders.get(version)
    if render is None:
        problems.append(f"protocol version {version} has no rendered protocol")
    else:
        known = {a["id"] for a in render["history"]}
        unknown = sorted(set(record["protocol"]["amendments"]) - known)
        if unknown:
            problems.append(f"amendments {unknown} are not in protocol {version}'s history")
    if not record["code"]["git_commit"]:
        problems.append("its code version names no git commit")
    return [Failure("provenance", f"record {record['run_id']}", p) for p in problems]


def _code_notes(ctx: Context) -> tuple[str, ...]:
    # Records from before the lock lack its key; one commit may have run in two environments.
    versions = Counter(
        (c["package_version"], c["git_commit"], c["git_dirty"], c.get("lock_sha256"))
        for c in (r["code"] for r in ctx.inv.records.values())
    )
    return tuple(
        f"{n} records from dtr-holes {package} at commit {commit}"
        + (f", requirements.lock sha256 {lock[:12]}" if lock else "")
        + (" (DIRTY: tracked files differed from the commit)" if dirty else "")
        for (package, commit, dirty, lock), n in sorted(versions.items(), key=str)
    )


def _trace_problem(ctx: Context, name: str) -> str | None:
    found = trace_of(ctx, name)
    return found if isinstance(found, str) else None
