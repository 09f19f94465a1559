"""The immutable outcome of one simulated replay."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

OK, OOM, THRASHED = "ok", "oom", "thrashed"  # a replay's outcomes
FAILING = (OOM, THRASHED)
# Not a replay's outcome: a run its wall-clock guard stopped (ours or unmodified simrd's), whose
# outcome is unknown. Every table and record names such a run by it.
TIMEOUT = "timeout"
OUTCOMES = (OK, OOM, THRASHED, TIMEOUT)


@dataclass(frozen=True)
class Failure:
    """Where a run that did not complete stopped."""

    op: int  # schedule index of the operator whose allocation failed (or whose remat broke the cap)
    request: int  # bytes that operator asked for
    pinned: int  # bytes in use outside the evictable pool at the failure
    depth: int  # rematerialization nesting depth at the failure
    over_budget: int  # bytes in use + request - budget (0 or less for a thrashed run)


def interval_top(budget_hi: int | None, unbounded: int) -> int:
    """`Result.top` of a Result stated as a dict (a record's): its `budget_hi`, or `unbounded`."""
    return unbounded if budget_hi is None else budget_hi


@dataclass(frozen=True)
class Result:
    """Everything one replay measured; equal inputs give an equal Result."""

    trace: str
    trace_sha256: str
    policy: str
    params: tuple[tuple[str, float], ...]
    budget: int
    overhead_cap: float | None
    outcome: str  # OK / OOM / THRASHED
    clock: int  # simrd's clock: 1 + model compute + remat compute
    model_compute: int
    remat_compute: int
    overhead: float  # (model + remat compute) / model compute of the whole trace
    peak_memory: int  # largest memory in use seen
    evictions: int  # storages chosen by the policy under memory pressure
    eager_frees: int  # storages freed because their last reference was released
    rematerializations: int  # operator executions that recomputed something evicted
    heuristic_evals: int  # policy score evaluations
    lock_fallbacks: int  # decisions where every pool storage was locked (TControlInspired)
    eviction_seq_sha256: str  # sha256 of the evicted root-tensor names, "\n"-joined, in order
    first_evictions: tuple[str, ...]  # first 50 of those names
    last_evictions: tuple[str, ...]  # last 20 of those names
    max_depth: int  # deepest rematerialization nesting reached
    peak_pinned: int  # most bytes in use outside the evictable pool at an allocation check
    peak_pinned_depth: int  # nesting depth when that peak was seen
    failure: Failure | None
    # Every budget in [budget_lo, budget_hi] replays identically: all fields are equal but
    # `budget` and `failure.over_budget`, which are computed from the budget itself.
    budget_lo: int
    budget_hi: int | None  # None: no upper limit

    def top(self, unbounded: int) -> int:
        """The top of the certified interval: `budget_hi`, or `unbounded` (what the caller
        takes for "no upper limit") when it has none."""
        return interval_top(self.budget_hi, unbounded)

    @classmethod
    def from_dict(cls, values: dict) -> Result:
        """The Result that `to_dict` gave `values`."""
        failure = values["failure"] and Failure(**values["failure"])
        return cls(
            **{
                **values,
                "params": tuple(values["params"].items()),
                "first_evictions": tuple(values["first_evictions"]),
                "last_evictions": tuple(values["last_evictions"]),
                "failure": failure,
            }
        )

    def to_dict(self) -> dict:
        """A JSON-ready dict: parameters as a mapping, other tuples as lists."""
        fields = dataclasses.asdict(self)
        return {
            **fields,
            "params": dict(self.params),
            "first_evictions": list(self.first_evictions),
            "last_evictions": list(self.last_evictions),
        }
