"""Every path the pipeline writes under results/ and the stages' names, for rules and code alike."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import NamedTuple, TypeVar

# Each path function gives, with no arguments, the rules' wildcard pattern under RESULTS, and
# with values, the path under `root`: a string under a string root, a Path under a Path root.
Root = TypeVar("Root", str, Path)
RESULTS = "results"  # the pipeline's results directory, relative to its working directory

# The stages whose records sample a trace × policy, by the names their records carry: the
# study's three in the order they run (Stage B refines what A and C found); the protocol's
# point stages add more. Each sampling stage's job outputs lie in a lower-case directory.
STAGE_A, STAGE_C, STAGE_B = "A", "C", "B"
SAMPLED = (STAGE_A, STAGE_C, STAGE_B)
# The stages whose runs read or probe the samples (ad hoc: a run outside the pipeline).
EDGE, REPEAT, EXPLAIN, MAP, ADHOC = "edge", "repeat", "explain", "map", "adhoc"
DERIVED = (EDGE, REPEAT, EXPLAIN, MAP, ADHOC)

# The kinds of job output that list records: a sampling stage's jobs, a series' edges and
# repeats, a merged map (which lists its chunks' records); and the stage of the records each
# lists (a sampling job's: its directory's stage).
SAMPLES, EDGES, REPEATS, MAPS = "sampled", "edges", "repeats", "maps"
LISTS = {EDGES: EDGE, REPEATS: REPEAT, MAPS: MAP}
EXPLANATIONS = "explain"  # a series' explained pairs: a directory
TABLES = ("holes", "comparison", "crosscheck", "paper")  # the tables every run makes
STAGE_DIR = "stage_"  # and a sampling stage's name in paths: its directory


def stages(points: Iterable[str] = ()) -> tuple[str, ...]:
    """Every stage that samples under a protocol whose point stages are `points` (their names):
    the study's, then the point stages."""
    return (*SAMPLED, *points)


def planned(points: Iterable[str] = ()) -> tuple[str, ...]:
    """The sampling stages whose points do not depend on outcomes (all but Stage B)."""
    return tuple(s for s in stages(points) if s != STAGE_B)


def stage_key(stage: str) -> str:
    """A sampling stage's name in paths (the rules' `{stage}` wildcard): lower case."""
    return stage.lower()


def stage_dir(stage: str) -> str:
    """The directory of a sampling stage's job outputs."""
    return STAGE_DIR + stage_key(stage)


def _under(root: Root, *parts: str) -> Root:
    """`parts` joined under `root` (the empty string: relative to the results directory)."""
    if isinstance(root, Path):
        return root.joinpath(*parts)
    return "/".join((root, *parts)) if root else "/".join(parts)


def sweep_job(
    stage: str = "{stage}",
    trace: str = "{trace}",
    policy: str = "{policy}",
    job: int | str = "{job}",
    root: Root = RESULTS,
) -> Root:
    """A sampling job's output: the run ids of its points' records."""
    return _under(root, stage_dir(stage), trace, policy, f"job{job}.json")


def refinement_plan(trace: str = "{trace}", root: Root = RESULTS) -> Root:
    """A trace's Stage B plan: the intervals it refines."""
    return _under(root, stage_dir(STAGE_B), trace, "plan.json")


def series(
    kind: str, trace: str = "{trace}", policy: str = "{policy}", root: Root = RESULTS
) -> Root:
    """A trace × policy's output of a per-series stage: its edges or repeats (JSON), or its
    explanations (a directory)."""
    name = policy if kind == EXPLANATIONS else f"{policy}.json"
    return _under(root, kind, trace, name)


def series_key(path: str | Path) -> tuple[str, str]:
    """The trace and policy that a per-series output's path names."""
    found = PurePosixPath(path)
    return found.parent.name, found.stem


def map_plan(trace: str = "{trace}", root: Root = RESULTS) -> Root:
    """A trace's map plan: the byte ranges each policy's map covers."""
    return _under(root, MAPS, trace, "plan.json")


def map_chunk(
    trace: str = "{trace}",
    policy: str = "{policy}",
    first: int | str = "{first}",
    last: int | str = "{last}",
    root: Root = RESULTS,
) -> Root:
    """One chunk of a series' map."""
    return _under(root, MAPS, trace, policy, f"{first}-{last}.parquet")


def merged_map(trace: str = "{trace}", policy: str = "{policy}", root: Root = RESULTS) -> Root:
    """A series' map, its chunks merged."""
    return _under(root, MAPS, trace, f"{policy}.parquet")


def baseline(trace: str = "{trace}", root: Root = RESULTS) -> Root:
    """A trace's checksum, peak memory and model compute."""
    return _under(baselines(root), f"{trace}.json")


def baselines(root: Root = RESULTS) -> Root:
    return _under(root, "baselines")


def ranking(
    trace: str = "{trace}",
    digest: str = "{digest}",
    seed: int | str = "{seed}",
    root: Root = RESULTS,
) -> Root:
    """A trace's storage ranking (betweenness) under a seed; `digest`: the trace's sha256 head."""
    return _under(root, "centrality", f"{trace}-{digest}-{seed}.parquet")


def protocol_render(version: str = "{version}", root: Root = RESULTS) -> Root:
    """The protocol, amendments applied, as one version's jobs read it."""
    return _under(protocol_renders(root), f"{version}.json")


def protocol_renders(root: Root = RESULTS) -> Root:
    return _under(root, "protocol")


def records(root: Root = RESULTS) -> Root:
    """The execution records' directory: one JSON file per run, named by its run id."""
    return _under(root, "records")


def records_table(root: Root = RESULTS) -> Root:
    return _under(root, "records.parquet")


def table(name: str, ext: str = "parquet", root: Root = RESULTS) -> Root:
    """A results table: Parquet, or its Markdown rendering (`ext` "md")."""
    return _under(root, "tables", f"{name}.{ext}")


def figure(kind: str, *names: str, root: Root = RESULTS) -> Root:
    """A figure's path without its extension (PNG and PDF): its kind, then what it shows."""
    return _under(figures(root), figure_name(kind, *names))


def figure_name(kind: str, *names: str) -> str:
    """A figure's file name without its extension, e.g. `cliffs-resnet32`."""
    return "-".join((kind, *names))


def figures(root: Root = RESULTS) -> Root:
    return _under(root, "figures")


def crosscheck_work(root: Root = RESULTS) -> Root:
    """The cross-check's unpacked simrd, trace logs and cached runs."""
    return _under(root, "crosscheck")


def audit_report(ext: str, root: Root = RESULTS) -> Root:
    """The audit's report: Markdown (`ext` "md") or JSON."""
    return _under(root, "audit", f"audit.{ext}")


def evidence_table(root: Root = RESULTS) -> Root:
    """Every execution ever recorded, with its status (CSV)."""
    return _under(root, "evidence.csv")


def log(name: str) -> str:
    """A job's log under the results directory (`name`: a rule's, with wildcards)."""
    return _under(RESULTS, "logs", f"{name}.log")


def benchmark(name: str) -> str:
    """A job's benchmark under the results directory (`name`: as its log's)."""
    return _under(RESULTS, "benchmarks", f"{name}.tsv")


# Job outputs that list records, relative to the results directory, as globs.
JOB_GLOBS = (
    sweep_job("*", "*", "*", "*", root=""),
    series(EDGES, "*", "*", root=""),
    series(REPEATS, "*", "*", root=""),
)
MAP_GLOB = merged_map("*", "*", root="")


class Listing(NamedTuple):
    """What a job output's path (relative to the results directory) says of the records it
    lists: its kind, their stage, trace and policy."""

    kind: str
    stage: str
    trace: str
    policy: str


def listing(rel: str) -> Listing:
    """The kind, records' stage, trace and policy of a job output or merged map."""
    top, trace, name = PurePosixPath(rel).parts[:3]
    if top.startswith(STAGE_DIR):
        return Listing(SAMPLES, top.removeprefix(STAGE_DIR).upper(), trace, name)
    return Listing(top, LISTS[top], trace, PurePosixPath(name).stem)
