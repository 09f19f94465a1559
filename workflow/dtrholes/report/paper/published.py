"""The study's published results as data: its points, final table and Table 1 (the CSV files of
protocol/published/) and its own names and rules (study.yaml there)."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from dtrholes.core import paths
from dtrholes.core.samples import Sample
from dtrholes.report.hypotheses import REFERENCE
from simulator import UserError
from simulator.result import OK

PUBLISHED = Path(__file__).resolve().parents[4] / "protocol" / "published"
STUDY = "study.yaml"


@dataclass(frozen=True)
class StudyNames:
    """The study's own names and rules, as study.yaml states them."""

    stages: Mapping[str, str]  # its stage names -> the stages of ours that replay them
    compared: tuple[str, ...]  # our stages that hold its points, in the comparison's order
    simrd_policy: str  # the policy name of its runs of unmodified simrd
    confirmatory: tuple[str, ...]
    groups: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]  # final table: stages, policies
    region_stages: tuple[str, ...]  # Table 1: where the regions come from
    confirming: tuple[str, ...]  # Table 1: where the repeats that confirm them come from
    dev_trace: str  # Table 1's development row: regions and repeats from the dev sweep
    repeats: int  # runs a confirmation point needs
    figure1_traces: tuple[str, ...]
    figure1_policy: str

    @property
    def table1_stages(self) -> tuple[str, ...]:
        """The stages Table 1 reads: the regions' and the development sweep's."""
        return (*self.region_stages, "DEV")


@cache
def study_names(directory: Path = PUBLISHED) -> StudyNames:
    """The study's names and rules (`directory`/study.yaml)."""
    path = Path(directory) / STUDY
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        groups = data["groups"]
        return StudyNames(
            stages=dict(data["stages"]),
            compared=tuple(data["compared"]),
            simrd_policy=data["simrd_policy"],
            confirmatory=tuple(data["confirmatory"]),
            groups={name: (tuple(g["stages"]), tuple(g["policies"])) for name, g in groups.items()},
            region_stages=tuple(data["table1"]["region_stages"]),
            confirming=tuple(data["table1"]["confirming"]),
            dev_trace=data["table1"]["dev_trace"],
            repeats=int(data["table1"]["repeats"]),
            figure1_traces=tuple(data["figure1"]["traces"]),
            figure1_policy=data["figure1"]["policy"],
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise UserError(str(path), "the study's names and rules", repr(exc)) from None


@dataclass(frozen=True)
class PublishedRun:
    """One execution of the study (a row of evidence.csv or dev.csv)."""

    run_id: str
    stage: str  # as the study wrote it
    trace: str
    policy: str  # this project's name
    ratio: str  # verbatim
    budget: int
    repeat: int
    status: str
    overhead: str  # verbatim, empty if none
    peak_pinned: int | None
    depth_at_peak_pinned: int | None
    max_depth: int | None
    valid: bool
    excluded: str

    @property
    def sample(self) -> Sample:
        return Sample(
            stage=study_names().stages[self.stage],
            trace=self.trace,
            policy=self.policy,
            ratio=float(self.ratio),
            budget=self.budget,
            repeat=self.repeat,
            outcome=self.status,
            overhead=float(self.overhead) if self.overhead else None,
            run_id=self.run_id,
        )

    @property
    def text(self) -> str:
        return f"ok {self.overhead}" if self.status == OK else self.status


@dataclass(frozen=True)
class FinalRow:
    """One trace x policy row of the study's final table; None where no value is given."""

    group: str  # frozen (Stages A + C + B) or baselines (Stage A only)
    trace: str
    policy: str
    samples: int | None = None
    first_ok: float | None = None
    failed_oom: int | None = None
    failed_thrashed: int | None = None
    regions: int | None = None
    stable_from: float | None = None
    timeouts: int | None = None
    timeouts_at_or_above_stable: int | None = None
    geo: float | None = None
    geo_n: int | None = None
    geo_worst: float | None = None
    h1: str | None = None
    h2: str | None = None
    h3: str | None = None
    failed_at: str | None = None  # ratio lists as spans (see `span`)
    timeouts_at: str | None = None
    timeouts_at_or_above_stable_at: str | None = None
    thrashed_below: int | None = None  # thrashed runs below first ok, repeats included
    thrashed_below_at: str | None = None

    @property
    def label(self) -> str:
        return f"{self.group} {self.trace} {self.policy}"


@dataclass(frozen=True)
class Region:
    """One row of the study's Table 1: a DTR failure region and the repeats that confirm it."""

    trace: str
    ok_below: float | None
    first_fail: float
    last_fail: float
    ok_above: float | None
    confirmed_points: tuple[float, ...]
    status: str
    note: str = ""


@dataclass(frozen=True)
class Published:
    """Everything the comparison reads of the study."""

    points: tuple[PublishedRun, ...]
    final: tuple[FinalRow, ...]
    table1: tuple[Region, ...]

    @property
    def valid(self) -> tuple[PublishedRun, ...]:
        return tuple(p for p in self.points if p.valid)


# Cell kinds: how a column is parsed from the CSV and written as canonical text.
RATIO, COUNT, GEO, WORST, TEXT, SPAN = "ratio", "count", "geo", "worst", "text", "span"
FINAL_KINDS = {
    "samples": COUNT,
    "first_ok": RATIO,
    "failed_oom": COUNT,
    "failed_thrashed": COUNT,
    "regions": COUNT,
    "stable_from": RATIO,
    "timeouts": COUNT,
    "timeouts_at_or_above_stable": COUNT,
    "geo": GEO,
    "geo_n": COUNT,
    "geo_worst": WORST,
    "h1": TEXT,
    "h2": TEXT,
    "h3": TEXT,
    "failed_at": SPAN,
    "timeouts_at": SPAN,
    "timeouts_at_or_above_stable_at": SPAN,
    "thrashed_below": COUNT,
    "thrashed_below_at": SPAN,
}
TABLE1_COLUMNS = ("ok_below", "first_fail", "last_fail", "ok_above", "confirmed_points", "status")


def span(ratios: Iterable[float]) -> str | None:
    """A set of ratios as the study lists them: one or two enumerated, more as `lowest-highest`."""
    values = sorted(set(ratios))
    if not values:
        return None
    if len(values) <= 2:
        return ";".join(map(str, values))
    return f"{values[0]}-{values[-1]}"


def _parse(kind: str, text: str) -> object:
    if text == "":
        return None
    if kind == COUNT:
        return int(text)
    if kind in (RATIO, GEO, WORST):
        return float(text)
    if kind == SPAN and "-" in text:
        low, high = text.split("-")
        return f"{float(low)}-{float(high)}"
    if kind == SPAN:
        return span(float(r) for r in text.split(";"))
    return text


def render(kind: str, value: object) -> str:
    """A cell's canonical text: how published and computed cells are compared."""
    if value is None:
        return ""
    if kind == GEO:
        return f"{value:.4f}"
    if kind == WORST:
        return f"{value:.2f}"
    return str(value)


def _csv_rows(path: Path) -> list[tuple[int, dict]]:
    try:
        with path.open(encoding="utf-8", newline="") as f:
            return list(enumerate(csv.DictReader(f), start=2))
    except OSError as exc:
        raise UserError(str(path), "a readable CSV file", str(exc)) from None


def _guarded(path: Path, line: int, build: Callable[[dict], object], row: dict) -> object:
    """A CSV row parsed by `build`; a malformed one is a user error naming its line."""
    try:
        return build(row)
    except (KeyError, ValueError, TypeError) as exc:
        where = f"{path}:{line}"
        raise UserError(where, "a row of the published transcription", repr(exc)) from None


def _read(path: Path, build: Callable[[dict], object]) -> tuple:
    return tuple(_guarded(path, line, build, row) for line, row in _csv_rows(path))


def _int_or_none(text: str) -> int | None:
    return int(text) if text else None


def _run(row: dict) -> PublishedRun:
    return PublishedRun(
        run_id=row["run_id"],
        stage=row["stage"],
        trace=row["trace"],
        policy=row["policy"],
        ratio=row["ratio"],
        budget=int(row["budget"]),
        repeat=int(row["repeat"]),
        status=row["status"],
        overhead=row["overhead"],
        peak_pinned=_int_or_none(row["peak_pinned"]),
        depth_at_peak_pinned=_int_or_none(row["depth_at_peak_pinned"]),
        max_depth=_int_or_none(row["max_depth"]),
        valid=row["valid"] == "yes",
        excluded=row["excluded"],
    )


def _final_row(row: dict) -> FinalRow:
    values = {name: _parse(kind, row[name]) for name, kind in FINAL_KINDS.items()}
    return FinalRow(row["group"], row["trace"], row["policy"], **values)


def _region(row: dict) -> Region:
    return Region(
        trace=row["trace"],
        ok_below=float(row["ok_below"]),
        first_fail=float(row["first_fail"]),
        last_fail=float(row["last_fail"]),
        ok_above=float(row["ok_above"]),
        confirmed_points=tuple(float(r) for r in row["confirmed_points"].split(";")),
        status=row["status"],
        note=row["note"],
    )


def load(directory: Path = PUBLISHED) -> Published:
    """The study's points (evidence.csv then dev.csv, in file order) and its two tables."""
    directory = Path(directory)
    points = _read(directory / "evidence.csv", _run) + _read(directory / "dev.csv", _run)
    return Published(
        points=points,
        final=_read(directory / "final_table.csv", _final_row),
        table1=_read(directory / "table1.csv", _region),
    )


def restrict(published: Published, series: Iterable[tuple[str, str, str]]) -> Published:
    """What runs of some (stage, trace, policy) series can be compared with: the study's points
    of those series (its simrd runs beside DTR's), the final table's rows whose Stage A series
    and DTR's ran, and Table 1's regions whose stages ran DTR."""
    ran, names = set(series), study_names()

    def point(p: PublishedRun) -> bool:
        policy = REFERENCE if p.policy == names.simrd_policy else p.policy
        return (names.stages[p.stage], p.trace, policy) in ran

    def row(r: FinalRow) -> bool:
        return {(paths.STAGE_A, r.trace, r.policy), (paths.STAGE_A, r.trace, REFERENCE)} <= ran

    def region(r: Region) -> bool:
        stages = ("DEV",) if r.trace == names.dev_trace else names.region_stages
        return any((stage, r.trace, REFERENCE) in ran for stage in stages)

    return Published(
        points=tuple(filter(point, published.points)),
        final=tuple(filter(row, published.final)),
        table1=tuple(filter(region, published.table1)),
    )


def simrd_points(published: Published) -> list[tuple[str, str, int]]:
    """Where the study ran unmodified simrd, as the runs of DTR it replays: trace, policy and
    budget, each once, in its order."""
    return list(
        dict.fromkeys(
            (p.trace, REFERENCE, p.budget)
            for p in published.valid
            if p.policy == study_names().simrd_policy
        )
    )


def study_samples(published: Published) -> list[Sample]:
    """The study's valid runs as samples, in its file order (which its rules depend on)."""
    return [p.sample for p in published.valid]
