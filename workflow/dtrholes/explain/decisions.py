"""The decisions behind a hole: the failing run's removal of the storage to retain, the completing
run's contrasting decision, the same allocation in the other run, and the probe of candidates."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dtrholes.explain.types import (
    Candidate,
    Cascade,
    Decision,
    Decisive,
    Divergence,
    Probe,
    ProbedRun,
    RankedDecision,
    SameAllocation,
    StepActivity,
    StepFailure,
)
from simulator import Events, Recording
from simulator.events import KINDS


@dataclass(frozen=True)
class Target:
    """The storage to retain and how the failing run removed it (by decision `decision`, or
    freed when None)."""

    storage: str
    removed_by: str | None
    decision: int | None
    step: int | None


def retention_target(cascade: Cascade, divergence: Divergence) -> Target | None:
    """The storage to retain: the outermost one the failure had to rebuild, else the failing
    run's first differing choice."""
    if cascade.rebuilding:
        outer = cascade.rebuilding[0]
        return Target(
            outer.storage, outer.removed_by, outer.evicted_by_decision, outer.evicted_at_step
        )
    chosen = divergence.fail
    if chosen is None:
        return None
    return Target(chosen.storage, "evict", chosen.decision, chosen.step)


def decisive_decisions(
    recorded: dict[str, Recording], target: Target | None, cascade: Cascade, top: int
) -> Decisive | None:
    """The decisions that turn the larger budget into a failure: the failing run's removal of
    the storage to retain (with its candidates when a decision evicted it), and the completing
    run's contrasting decision: its last eviction, at or before that removal, of a storage the
    failing run still holds there, with what the failing run did at that step."""
    if target is None:
        return None
    ok, fail = recorded["ok"].events, recorded["fail"].events
    number = target.decision
    anchor = _removal(fail, target.storage, number)
    contrast = _contrast(ok, fail, anchor)
    needed = cascade.step if cascade.rebuilding else None
    return Decisive(
        storage=target.storage,
        size=int(fail.event(anchor)["size"]),
        removed_by=target.removed_by,
        removed_at_step=target.step,
        needed_at_step=needed,
        ok_holds_it=_holds(ok, target.storage, target.step if needed is None else needed),
        eviction=None if number is None else _listed(recorded["fail"], number, top),
        contrast=None if contrast is None else _listed(recorded["ok"], contrast, top),
        failing_at_contrast=None if contrast is None else _same_allocation(ok, fail, contrast),
        completing_at_eviction=None if number is None else _same_allocation(fail, ok, number),
    )


def _decision_at(events: Events, number: int) -> np.ndarray:
    """The position of decision `number` (numbered from 0), as a one-element array."""
    positions = events.where("decision")
    return positions[events.values(positions, "decision") == number]


def _removal(events: Events, storage: str, decision: int | None) -> int:
    """The position of the eviction by `decision` (None: the storage's last eviction or free)."""
    index = events.storage_names.index(storage)
    positions = events.where("evict", "free")
    positions = positions[events.values(positions, "storage") == index]
    if decision is not None:
        evicts = events.values(positions, "kind") == KINDS.index("evict")
        by = np.zeros(len(positions), dtype=bool)
        by[evicts] = events.values(positions[evicts], "decision") == decision
        positions = positions[by]
    return int(positions[-1])


def _fate(events: Events, position: int) -> tuple[np.ndarray, np.ndarray]:
    """Per storage (by index), at `position`: whether it is out of memory (evicted or freed,
    not rebuilt since), and the step of its last eviction or free (-1: none)."""
    positions = events.where("evict", "free", "rebuilt")
    positions = positions[positions <= position][::-1]
    storages = events.values(positions, "storage").astype(int)
    seen, last = np.unique(storages, return_index=True)
    gone = np.zeros(len(events.storage_names), dtype=bool)
    gone[seen] = events.values(positions[last], "kind") != KINDS.index("rebuilt")
    removals = positions[events.values(positions, "kind") != KINDS.index("rebuilt")]
    seen, last = np.unique(events.values(removals, "storage").astype(int), return_index=True)
    removed = np.full(len(events.storage_names), -1, dtype=np.int64)
    removed[seen] = events.values(removals[last], "step")
    return gone, removed


def _holds(events: Events, storage: str, step: int) -> bool:
    """Whether the run holds `storage` (created by then) when `step` begins."""
    before = events.where("evict", "free", "rebuilt", steps=(0, step - 1))
    end = int(before[-1]) if len(before) else -1
    return not bool(_fate(events, end)[0][events.storage_names.index(storage)])


def _contrast(ok: Events, fail: Events, anchor: int) -> int | None:
    """The completing run's last decision at a step up to the failing run's event at `anchor`
    whose storage the failing run holds at `anchor` and neither evicts nor frees from that step
    on; its number, or None."""
    gone, removed = _fate(fail, anchor)
    decisions = ok.where("decision")
    steps = ok.values(decisions, "step")
    upto = steps <= fail.event(anchor)["step"]
    decisions, steps = decisions[upto], steps[upto]
    storages = ok.values(decisions, "storage").astype(int)
    kept = decisions[~gone[storages] & (removed[storages] < steps)]
    return int(ok.values(kept[-1:], "decision")[0]) if len(kept) else None


def _listed(recorded: Recording, number: int, top: int) -> RankedDecision | None:
    """Decision `number` with its best candidates (at least two: the runner-up)."""
    step = int(recorded.events.values(_decision_at(recorded.events, number), "step")[0])
    listed = _decisions(recorded.candidates((step, step), (number, number), max(top, 2)))
    return listed[0] if listed else None


ALLOCATION = ("step", "op", "request", "depth")  # what identifies an allocation check in a step


def _same_allocation(mine: Events, other: Events, number: int) -> SameAllocation:
    """What the other run did at the allocation check that made decision `number` of this one
    (the same step, operator, request and depth, as often met before): its shortfall (bytes in
    use + request - budget; at most 0: it fit) and what it evicted."""
    decided = int(_decision_at(mine, number)[0])
    step = int(mine.rows[decided, -1])
    checks = mine.where("alloc", steps=(step, step))
    check = checks[checks < decided][-1:]
    key = _allocation_key(mine, check)
    same = (_allocation_key(mine, checks) == key).all(axis=1)
    nth = int(np.count_nonzero(same & (checks < check)))
    theirs = other.where("alloc", steps=(step, step))
    theirs = theirs[(_allocation_key(other, theirs) == key).all(axis=1)]
    found = SameAllocation(step=step, op=int(key[0, 1]), shortfall=None, evicted=(), freed=0)
    if nth >= len(theirs):
        return found
    at = int(theirs[nth])
    later = other.where("alloc", "fail")
    end = int(later[later > at][0]) if np.any(later > at) else len(other)
    evicts = other.where("evict")
    evicts = evicts[(evicts > at) & (evicts < end)]
    names = other.values(evicts, "storage").astype(int).tolist()
    return dataclasses.replace(
        found,
        shortfall=int(other.values(np.array([at]), "shortfall")[0]),
        evicted=tuple(other.storage_names[s] for s in names),
        freed=int(other.values(evicts, "size").sum()),
    )


def _allocation_key(events: Events, positions: np.ndarray) -> np.ndarray:
    return np.stack([events.values(positions, c) for c in ALLOCATION], axis=1)


def probe_decisions(
    recorded: dict[str, Recording], window: tuple[int, int], top: int, decisions: int | None
) -> Probe:
    """Each run's decisions at the window's steps, with the top-ranked candidates, and what
    each step of the window did."""
    runs = {name: _probed(r, window, top, decisions) for name, r in recorded.items()}
    return Probe(first_step=window[0], last_step=window[1], top=top, **runs)


def _probed(recorded: Recording, window: tuple[int, int], top: int, most: int | None) -> ProbedRun:
    """One run's part of the probe: at most `most` of its decisions in the window, the first
    and last halves, each with its best candidates (replayed from the recording's nearest
    saved state), how many were left out, and what each step of the window did."""
    events = recorded.events
    numbers = events.values(events.where("decision", steps=window), "decision").astype(int)
    omitted = 0 if most is None else max(0, len(numbers) - most)
    listed: tuple[RankedDecision, ...] = ()
    if len(numbers):  # one replay lists both halves
        span = (int(numbers[0]), int(numbers[-1]))
        omit = (int(numbers[most // 2]), int(numbers[most // 2 + omitted - 1])) if omitted else None
        listed = _decisions(recorded.candidates(window, span, top, omit))
    return ProbedRun(decisions=listed, omitted=omitted, steps=_steps(events, window))


def _steps(events: Events, window: tuple[int, int]) -> tuple[StepActivity, ...]:
    """Per step of the window that evicted, rematerialized or failed: what it did, in step
    order. Read column-wise: a thrashing run evicts ~10^4 times in a window."""
    steps: dict[int, dict] = {}

    def at(step: int) -> dict:
        if step not in steps:  # not setdefault: that would build a dict per event
            steps[step] = {"step": step, "evicted": [], "remats": 0, "depth": 0}
        return steps[step]

    evicts, remats = events.where("evict", steps=window), events.where("remat", steps=window)
    for step, storage in zip(*_ints(events, evicts, "step", "storage"), strict=True):
        at(step)["evicted"].append(events.storage_names[storage])
    for step, depth in zip(*_ints(events, remats, "step", "depth"), strict=True):
        done = at(step)
        done["remats"] += 1
        done["depth"] = max(done["depth"], depth)
    for e in events.of("fail", steps=window):
        at(e["step"])["failed"] = StepFailure(op=e["op"], outcome=e["outcome"], depth=e["depth"])
    return tuple(
        StepActivity(**{**steps[step], "evicted": tuple(steps[step]["evicted"])})
        for step in sorted(steps)
    )


def _ints(events: Events, positions: np.ndarray, *names: str) -> list[list[int]]:
    return [events.values(positions, name).astype(int).tolist() for name in names]


def _decisions(events: Events) -> tuple[RankedDecision, ...]:
    """The decisions listed with candidates, from a replay that kept the best few of each
    (`Recording.candidates`): candidates are those the policy could choose, in pool order up to
    the first zero score (where a scan stops), ranked by score, ties to the later one. The
    chosen storage's rank is None where the policy orders otherwise (TwoPhase's cover test)."""
    listed: list[RankedDecision] = []
    positions = events.where("candidate", "ranking", "decision")
    decided = np.flatnonzero(events.values(positions, "kind") == KINDS.index("decision"))
    begins = np.concatenate(([0], decided + 1))[: len(decided)]  # after the decision before
    inside = begins != decided  # a ranking before it: listed
    begins, decided = begins[inside], decided[inside]
    for begin, at in zip(begins.tolist(), decided.tolist(), strict=True):
        ranking = events.event(int(positions[at - 1]))
        best = positions[begin : at - 1]
        order = np.lexsort((-np.arange(len(best)), events.values(best, "score")))
        decided = decision_of(events.event(int(positions[at])))
        listed.append(
            RankedDecision(
                **dataclasses.asdict(decided),
                rank=ranking["rank"] or None,
                candidates=ranking["evaluated"],
                top=tuple(of_event(Candidate, events.event(int(c))) for c in best[order]),
            )
        )
    return tuple(listed)


def decision_of(d: dict | None) -> Decision | None:
    return None if d is None else of_event(Decision, d)


def of_event(kind: type, event: dict) -> object:
    """The event's columns that `kind` has, as `kind`."""
    return kind(**{f.name: json_number(event[f.name]) for f in dataclasses.fields(kind)})


def json_number(value: object) -> object:
    """Scores can be infinite (a storage of 0 bytes); JSON has no infinity."""
    return "inf" if isinstance(value, float) and math.isinf(value) else value
