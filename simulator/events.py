"""The event stream of one replay, storages named by their root tensor, operators by index.

Every event carries its step: the operator the schedule was running (its index), while `op`
is the operator executing, a rematerialized one inside a step included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator import kernel

OUTCOMES = {kernel.OOM: "oom", kernel.THRASHED: "thrashed"}

# The columns after the kind, per kind (kernel.EV_* order); "score" is the only float.
_SCORED = ("op", "decision", "storage", "e_star", "size", "staleness", "neighbourhood", "score")
COLUMNS: dict[str, tuple[str, ...]] = {
    "alloc": ("op", "request", "memory", "pinned", "depth", "shortfall", "remat"),
    "decision": (*_SCORED, "shortfall"),
    "candidate": (*_SCORED, "eligible"),
    "evict": ("op", "decision", "storage", "size", "memory"),
    "remat": ("op", "tensor", "storage", "depth"),
    "rebuilt": ("op", "tensor", "storage", "depth"),
    "free": ("op", "command", "storage", "size", "memory"),
    "fail": ("op", "request", "memory", "pinned", "depth", "over_budget", "outcome"),
}
KINDS = tuple(COLUMNS)


@dataclass(frozen=True, eq=False)
class Events:
    """What a replay did, in order: every allocation check (with the shortfall: bytes in use +
    request − budget), eviction decision (the chosen storage's score components; inside the
    candidate window, preceded by every pool storage's, pool order), eviction,
    rematerialization entered and finished (with its nesting depth), eager free, and failure.
    """

    rows: np.ndarray  # float64 [events, kernel.EV_COLS], exact integers but for scores
    storage_names: tuple[str, ...]  # root tensor name of each storage
    tensor_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.rows)

    def of(self, *kinds: str) -> list[dict]:
        """The events of these kinds in order, each a dict with its position `seq` and step."""
        wanted = [KINDS.index(kind) for kind in kinds]
        picked = np.flatnonzero(np.isin(self.rows[:, 0], wanted))
        return [self.event(int(i)) for i in picked]

    def event(self, seq: int) -> dict:
        row = self.rows[seq]
        kind = KINDS[int(row[0])]
        event = {"seq": seq, "kind": kind, "step": int(row[-1])}
        for name, value in zip(COLUMNS[kind], row[1:-1], strict=False):
            event[name] = self._value(name, value)
        return event

    def _value(self, name: str, value: float) -> object:
        if name == "score":
            return float(value)
        if name == "storage":
            return self.storage_names[int(value)]
        if name == "tensor":
            return self.tensor_names[int(value)]
        if name == "outcome":
            return OUTCOMES[int(value)]
        if name in ("remat", "eligible"):
            return bool(value)
        return int(value)
