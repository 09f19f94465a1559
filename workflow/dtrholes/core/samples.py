"""A sample: one run's outcome at a budget, the unit every series, table and rule reads."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from simulator.errors import UserError
from simulator.result import OK, OUTCOMES, TIMEOUT

COMPLETE = "complete"  # a record's status when its run finished (else TIMEOUT)

Key = tuple[str, str, str, int, int]  # stage, trace, policy, budget, repeat


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One run's outcome at a budget; a reader that needs fewer fields leaves the others at
    their defaults (refinement reads ratios, the holes of a series budgets)."""

    outcome: str  # OK, OOM, THRASHED, or TIMEOUT (unresolved)
    budget: int | None = None
    ratio: float | None = None
    stage: str = ""
    trace: str = ""
    policy: str = ""
    repeat: int = 0
    overhead: float | None = None  # a completed run's
    run_id: str = ""

    @property
    def key(self) -> Key:
        return (self.stage, self.trace, self.policy, self.budget, self.repeat)

    @property
    def resolved(self) -> bool:
        return self.outcome != TIMEOUT

    @property
    def text(self) -> str:
        return f"ok {self.overhead!r}" if self.outcome == OK else self.outcome


def outcome_of(row: Mapping) -> str:
    """A records-table row's outcome (its `status` and `outcome`): TIMEOUT unless complete."""
    return row["outcome"] if row["status"] == COMPLETE else TIMEOUT


def record_outcome(record: Mapping) -> str:
    """An execution record's outcome: its result's, TIMEOUT when the guard stopped it."""
    return record["result"]["outcome"] if record["status"] == COMPLETE else TIMEOUT


def from_row(row: Mapping) -> Sample:
    """A records-table row (a dict or a DataFrame's record) as a sample."""
    outcome = outcome_of(row)
    if outcome not in OUTCOMES:
        raise UserError(f"run {row.get('run_id')}", "outcome ok, oom or thrashed", repr(outcome))
    return Sample(
        stage=str(row["stage"]),
        trace=str(row["trace"]),
        policy=str(row["policy"]),
        ratio=float(row["ratio"]),
        budget=int(row["budget"]),
        repeat=int(row["repeat"]),
        outcome=outcome,
        overhead=_number(row.get("overhead")) if outcome == OK else None,
        run_id=str(row.get("run_id") or ""),
    )


def _number(value: object) -> float | None:
    """A float column of a records row: None for a missing value (pandas gives NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)
