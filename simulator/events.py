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
    "ranking": ("op", "decision", "evaluated", "rank"),
}
KINDS = tuple(COLUMNS)


@dataclass(frozen=True, eq=False)
class Events:
    """What a replay did, in order: every allocation check (with the shortfall: bytes in use +
    request − budget), eviction decision (the chosen storage's score components; inside the
    candidate window, preceded by every pool storage's, pool order, or by the `top` best the
    scan evaluated and a ranking: how many it evaluated, the chosen one's rank among them or 0),
    eviction, rematerialization entered and finished (with its nesting depth), eager free, and
    failure.
    """

    rows: np.ndarray  # float64 [events, kernel.EV_COLS], exact integers but for scores
    storage_names: tuple[str, ...]  # root tensor name of each storage
    tensor_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.rows)

    def of(self, *kinds: str, steps: tuple[int, int] | None = None) -> list[dict]:
        """The events of these kinds in order, each a dict with its position `seq` and step
        (only those at steps `steps[0]`..`steps[1]` when given)."""
        return [self.event(int(i)) for i in self.where(*kinds, steps=steps)]

    def where(self, *kinds: str, steps: tuple[int, int] | None = None) -> np.ndarray:
        """The positions of the events `of` lists."""
        picked = np.isin(self.rows[:, 0], [KINDS.index(kind) for kind in kinds])
        if steps is not None:
            step = self.rows[:, -1]
            picked &= (steps[0] <= step) & (step <= steps[1])
        return np.flatnonzero(picked)

    def values(self, positions: np.ndarray, name: str) -> np.ndarray:
        """One column of the events at `positions`, as stored (storages and tensors by index,
        kinds by their index in KINDS); every kind among them must have it at one place."""
        if name in ("kind", "step"):
            return self.rows[positions, 0 if name == "kind" else -1]
        kinds = np.unique(self.rows[positions, 0]).astype(int)
        (place,) = {COLUMNS[KINDS[k]].index(name) for k in kinds} or {0}  # none: any column
        return self.rows[positions, place + 1]

    def count(self, kind: str, start: int, end: int) -> int:
        """How many events of this kind are at positions `start`..`end - 1`."""
        return int(np.count_nonzero(self.rows[start:end, 0] == KINDS.index(kind)))

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
