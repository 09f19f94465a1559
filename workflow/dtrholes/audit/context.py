"""What every check of the audit reads and gives: its options, the loaded results, failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dtrholes.audit import inventory
from dtrholes.traces import fetch
from simulator import Trace, UserError, parse_trace
from simulator.trace import provenance

SEED = 20261129


@dataclass(frozen=True)
class Failure:
    """One failed item of a check: where (a record, file or table row) and what is wrong."""

    check: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.where}: {self.message}"


@dataclass(frozen=True)
class Check:
    """One check's verdict: how many items it checked, every failure, and notes."""

    name: str
    count: int
    failures: tuple[Failure, ...]
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    def __str__(self) -> str:
        if self.passed:
            return f"{self.name}: passed ({self.count:,} checked)"
        first = self.failures[0]
        return (
            f"{self.name} FAILED ({len(self.failures):,} of {self.count:,}):"
            f" {first.where}: {first.message}"
        )


@dataclass(frozen=True)
class Options:
    """What to audit and how: `protocol` is the rendered protocol the tables were made under
    (default: the latest under results/protocol); `sample` records rerun besides edge points
    (None: every record), by `workers` processes."""

    results: Path
    data: Path
    sheet: Path
    protocol: Path | None = None
    sample: int | None = 20
    seed: int = SEED
    workers: int = 1


@dataclass(frozen=True)
class Context:
    """What the checks read, loaded once; traces are parsed from the archive when needed."""

    options: Options
    inv: inventory.Inventory | None  # None in a rerun worker, which reads no records
    sheet: dict[str, fetch.TraceEntry]
    traces: dict[str, Trace | str] = field(default_factory=dict)  # parsed, or why not
    origins: dict[str, dict | None] = field(default_factory=dict)  # an own trace's, by name


def load(options: Options) -> Context:
    inv = inventory.inventory(options.results, options.protocol)
    return Context(options, inv, {e.name: e for e in fetch.read_sheet(options.sheet)})


def trace_of(ctx: Context, name: str) -> Trace | str:
    """The trace parsed from its bytes (the archive's member, your own file, or the generated
    trace, each checked against the sheet's sha256), or why it cannot be trusted."""
    if name not in ctx.traces:
        ctx.traces[name], ctx.origins[name] = _parse(ctx.options, ctx.sheet, name)
    return ctx.traces[name]


def origin_of(ctx: Context, name: str) -> dict | None:
    """What the records of an own trace must say of it (its sheet file and the provenance line
    of its bytes), None for the study's traces (or one that cannot be read)."""
    trace_of(ctx, name)
    return ctx.origins[name]


def _parse(
    options: Options, sheet: dict[str, fetch.TraceEntry], name: str
) -> tuple[Trace | str, dict | None]:
    entry = sheet.get(name)
    if entry is None:
        return f"trace {name} is not in the trace sheet", None
    try:
        data, label = fetch.trace_bytes(entry, options.data, sheet=options.sheet)
    except UserError as exc:
        return str(exc), None
    origin = {"file": entry.file, "provenance": provenance(data)} if entry.role == "own" else None
    return parse_trace(data, label, name), origin
