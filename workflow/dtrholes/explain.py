"""Why a budget fails where another completes: divergence, decision probe, cascade, retention."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dtrholes.explanation import (
    Candidate,
    Cascade,
    ContrastNumbers,
    CountsByRun,
    Decision,
    Decisive,
    Divergence,
    EventCounts,
    EvictionNumbers,
    Explanation,
    FailurePoint,
    Mechanism,
    Probe,
    ProbedRun,
    RankedDecision,
    Rebuilding,
    Retention,
    RetentionNumbers,
    RunSummary,
    SameAllocation,
    StepActivity,
    StepFailure,
)
from simulator import Events, Options, Recording, Result, Trace, UserError, simulate
from simulator.events import KINDS
from simulator.result import OK

TOP = 5  # candidates listed per decision in the probe


@dataclass(frozen=True)
class Pair:
    """A completing and a failing budget of one trace under one policy."""

    trace: Trace
    policy: str
    ok: int
    fail: int
    params: tuple[tuple[str, float], ...] = ()
    overhead_cap: float | None = None
    peak: int | None = None  # the ratios' denominator, when known
    centrality: np.ndarray | None = None  # the storages' betweenness, if the policy reads it

    def record(self, budget: int) -> Recording:
        return Recording(self.trace, budget, self._options())

    def replay(self, budget: int) -> Result:
        """The budget's plain run, `simulate`'s."""
        return simulate(self.trace, budget, self._options())

    def _options(self) -> Options:
        return Options(self.policy, dict(self.params), self.overhead_cap, self.centrality)


class Runs:
    """The replays of a sequence of explanations: the recordings of the `keep` budgets used
    last, and every retention run, continued from its budget's recording (`Recording.retained`).
    Neighbouring pairs share budgets (a one-sample region's two brackets, the completing sample
    between two regions), which are then replayed once."""

    def __init__(self, keep: int = 2):
        self.keep = keep
        self.recorded: dict[tuple, Recording] = {}  # least recently used first
        self.retained: dict[tuple, Result] = {}

    def record(self, pair: Pair, budget: int) -> Recording:
        key = _run_key(pair, budget)
        if key in self.recorded:
            self.recorded[key] = self.recorded.pop(key)
        else:
            while len(self.recorded) >= self.keep:  # freed before the next one is recorded
                del self.recorded[next(iter(self.recorded))]
            self.recorded[key] = pair.record(budget)
        return self.recorded[key]

    def retain(self, pair: Pair, budget: int, storage: str | None) -> Result:
        """The budget's run with `storage` never a candidate (None: the plain run)."""
        key = (*_run_key(pair, budget), storage)
        if key not in self.retained:
            self.retained[key] = (
                pair.replay(budget)
                if storage is None
                else self.record(pair, budget).retained(storage)
            )
        return self.retained[key]


def _run_key(pair: Pair, budget: int) -> tuple:
    """What a run of the pair's trace and policy at `budget` depends on."""
    return pair.trace.sha256, pair.policy, pair.params, pair.overhead_cap, budget


def explain(
    pair: Pair,
    window: tuple[int, int] | None = None,
    top: int = TOP,
    decisions: int | None = None,
    control: Result | None = None,
    runs: Runs | None = None,
) -> Explanation:
    """The four parts of an explanation and its mechanism (see `markdown` for a reading).

    `window`: the steps (schedule indices of the operators run) whose decisions the probe lists;
    by default from the step where the failing run last evicted the storage its failure had to
    rebuild (else the first differing decision) to the failing step. `decisions`: at most this
    many per run, the window's first and last halves (a thrashing run decides ~10^5 times in
    its failing step alone), with the count left out between them. `control`: the failing
    budget's Result from an earlier run retaining nothing (`simulate`, the retention's code
    path), e.g. a record's; without one the control is replayed. `runs`: replays shared with
    other explanations (see `Runs`).
    """
    runs = runs or Runs()
    recorded = {"ok": runs.record(pair, pair.ok), "fail": runs.record(pair, pair.fail)}
    ok, fail = recorded["ok"].result, recorded["fail"].result
    if ok.outcome != OK or fail.outcome == OK:
        raise UserError(
            f"{pair.trace.name} at {pair.ok} and {pair.fail} bytes",
            "a completing and a failing budget",
            f"{ok.outcome} and {fail.outcome}",
        )
    divergence = _divergence(recorded["ok"].events, recorded["fail"].events)
    cascade = _cascade(fail, recorded["fail"].events, recorded["ok"].events)
    target = _target(cascade, divergence)
    decisive = _decisive(recorded, target, cascade, top)
    window = window or _default_window(decisive, divergence, cascade)
    summaries = summary(ok, pair.peak), summary(fail, pair.peak)
    retention = _retention(pair, runs, fail, target and target.storage, control)
    return Explanation(
        mechanism=mechanism(*summaries, decisive, cascade, retention),
        trace=pair.trace.name,
        trace_sha256=pair.trace.sha256,
        policy=fail.policy,
        params=fail.params,
        overhead_cap=pair.overhead_cap,
        peak_memory=pair.peak,
        ok=summaries[0],
        fail=summaries[1],
        divergence=divergence,
        decisive=decisive,
        probe=_probe(recorded, window, top, decisions),
        cascade=cascade,
        retention=retention,
    )


def _default_window(
    decisive: Decisive | None, divergence: Divergence, cascade: Cascade
) -> tuple[int, int]:
    """From the first decisive step (the completing run's contrasting decision, the failing
    run's removal of the storage to retain), else the divergence, to the failure."""
    last = cascade.step
    starts = [divergence.step]
    if decisive is not None:
        contrast = decisive.contrast
        starts = [decisive.removed_at_step, *([contrast.step] if contrast else [])]
    if starts[0] is None:
        return last, last
    return min(*starts, last), last


def summary(r: Result, peak: int | None) -> RunSummary:
    """What an explanation states of one run."""
    return RunSummary(
        budget=r.budget,
        ratio=r.budget / peak if peak else None,
        outcome=r.outcome,
        overhead=r.overhead,
        evictions=r.evictions,
        rematerializations=r.rematerializations,
        max_depth=r.max_depth,
        eviction_seq_sha256=r.eviction_seq_sha256,
    )


def _divergence(ok: Events, fail: Events) -> Divergence:
    """The common prefix of the two runs' eviction decisions and the first that differs."""
    events = {"ok": ok, "fail": fail}
    runs = {name: e.where("decision") for name, e in events.items()}
    keys = {
        name: np.stack([events[name].values(d, c) for c in ("step", "op", "storage")], axis=1)
        for name, d in runs.items()
    }
    n = min(len(d) for d in runs.values())
    differ = np.flatnonzero((keys["ok"][:n] != keys["fail"][:n]).any(axis=1))
    common = int(differ[0]) if len(differ) else n
    at = {
        name: events[name].event(int(d[common])) if common < len(d) else None
        for name, d in runs.items()
    }
    split = {name: at[name]["seq"] if at[name] else len(events[name]) for name in runs}
    first = [d for d in at.values() if d]
    return Divergence(
        common_prefix=common,
        step=min(d["step"] for d in first) if first else None,
        ok=_decision(at["ok"]),
        fail=_decision(at["fail"]),
        before=CountsByRun(*(_counts(e, 0, split[name]) for name, e in events.items())),
        after=CountsByRun(*(_counts(e, split[name], len(e)) for name, e in events.items())),
    )


def _decision(d: dict | None) -> Decision | None:
    return None if d is None else _of_event(Decision, d)


def _of_event(kind: type, event: dict) -> object:
    """The event's columns that `kind` has, as `kind`."""
    return kind(**{f.name: _json_number(event[f.name]) for f in dataclasses.fields(kind)})


def _counts(events: Events, start: int, end: int) -> EventCounts:
    return EventCounts(
        evictions=events.count("evict", start, end),
        rematerializations=events.count("remat", start, end),
    )


def _cascade(fail: Result, events: Events, ok_events: Events) -> Cascade:
    """The rematerializations in progress when the failing run stopped, outermost first, each
    with the eviction that made it necessary (and the completing run's fate of that storage)."""
    nested = events.where("remat", "rebuilt")
    entered = events.values(nested, "kind") == KINDS.index("remat")
    depth = np.cumsum(np.where(entered, 1, -1))  # rematerializations in progress after each
    lowest_after = np.append(np.minimum.accumulate(depth[::-1])[::-1][1:], depth[-1:] + 1)
    stack = nested[entered & (lowest_after >= depth)].tolist()  # entered, never finished
    (failure,) = events.of("fail")
    frames = np.array(stack, dtype=np.int64)
    storages = events.values(frames, "storage")
    removed = _by_storage(events, ("evict", "free"), storages, last=True)
    ok_evicted = _by_storage(ok_events, ("evict",), storages, last=False)
    return Cascade(
        step=failure["step"],
        op=failure["op"],
        outcome=fail.outcome,
        request=failure["request"],
        pinned=failure["pinned"],
        depth=failure["depth"],
        over_budget=failure["over_budget"],
        rebuilding=tuple(
            _rebuilt(events.event(at), removed[i], ok_evicted[i], failure)
            for i, at in enumerate(stack)
        ),
    )


def _by_storage(events: Events, kinds: tuple[str, ...], storages: np.ndarray, last: bool):
    """For each storage (by index), its last (or first) event of these kinds, or None."""
    positions = events.where(*kinds)
    of = events.values(positions, "storage")
    if last:
        positions, of = positions[::-1], of[::-1]
    seen, first = np.unique(of, return_index=True)
    at = dict(zip(seen.tolist(), positions[first].tolist(), strict=True))
    return [events.event(at[s]) if s in at else None for s in storages.tolist()]


def _rebuilt(frame: dict, last: dict | None, in_ok: dict | None, failure: dict) -> Rebuilding:
    """A storage being rebuilt, with how it last left memory (`last`: evicted by a decision or
    freed when its last reference was released; a freed storage is still rebuilt as a parent)
    and the completing run's first eviction of it (`in_ok`)."""
    return Rebuilding(
        storage=frame["storage"],
        op=frame["op"],
        depth=frame["depth"],
        size=last and last["size"],
        removed_by=last and last["kind"],
        evicted_by_decision=last and last.get("decision"),
        evicted_at_step=last and last["step"],
        steps_before_failure=last and failure["step"] - last["step"],
        ok_run_first_evicted_at_step=in_ok and in_ok["step"],
    )


@dataclass(frozen=True)
class Target:
    """The storage to retain and how the failing run removed it (by decision `decision`, or
    freed when None)."""

    storage: str
    removed_by: str | None
    decision: int | None
    step: int | None


def _target(cascade: Cascade, divergence: Divergence) -> Target | None:
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


def _decisive(
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


def _probe(
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
        decided = _decision(events.event(int(positions[at])))
        listed.append(
            RankedDecision(
                **dataclasses.asdict(decided),
                rank=ranking["rank"] or None,
                candidates=ranking["evaluated"],
                top=tuple(_of_event(Candidate, events.event(int(c))) for c in best[order]),
            )
        )
    return tuple(listed)


def _json_number(value: object) -> object:
    """Scores can be infinite (a storage of 0 bytes); JSON has no infinity."""
    return "inf" if isinstance(value, float) and math.isinf(value) else value


def _retention(
    pair: Pair, runs: Runs, fail: Result, storage: str | None, control: Result | None
) -> Retention | None:
    """Rerun the failing budget with `storage` never a candidate; a control retaining nothing
    (the plain run, replayed unless given) must give the failure exactly."""
    if storage is None:
        return None
    retained = runs.retain(pair, pair.fail, storage)
    control = control if control is not None else runs.retain(pair, pair.fail, None)
    return Retention(
        storage=storage,
        intervention=summary(retained, pair.peak),
        control=summary(control, pair.peak),
        control_reproduces_failure=control == fail,
        valid=control == fail,
        retaining_completes=retained.outcome == OK,
    )


def mechanism(
    ok: RunSummary,
    fail: RunSummary,
    decisive: Decisive | None,
    cascade: Cascade,
    retention: Retention | None,
) -> Mechanism:
    """The explanation's story in numbers and four or five sentences a reader can quote, from
    its other parts only (the audit derives it again)."""
    numbers = _mechanism_numbers(ok, fail, decisive, cascade, retention)
    return dataclasses.replace(numbers, text=" ".join(_sentences(numbers)))


def _mechanism_numbers(
    ok: RunSummary,
    fail: RunSummary,
    d: Decisive | None,
    c: Cascade,
    r: Retention | None,
) -> Mechanism:
    """The mechanism without its text."""
    removed = d and d.removed_at_step
    return Mechanism(
        budget_difference=fail.budget - ok.budget,
        storage=d and d.storage,
        size=d and d.size,
        removed_by=d and d.removed_by,
        removed_at_step=removed,
        needed_at_step=d and d.needed_at_step,
        steps_until_failure=None if removed is None else c.step - removed,
        eviction=d and _eviction_numbers(d.eviction, d.completing_at_eviction),
        contrast=d and _contrast_numbers(d.contrast, d.failing_at_contrast),
        failure=FailurePoint(**{f.name: getattr(c, f.name) for f in FAILURE}),
        retention=r
        and RetentionNumbers(
            outcome=r.intervention.outcome, overhead=r.intervention.overhead, valid=r.valid
        ),
        text="",
    )


FAILURE = dataclasses.fields(FailurePoint)


def _eviction_numbers(
    e: RankedDecision | None, completing: SameAllocation | None
) -> EvictionNumbers | None:
    if e is None:
        return None
    runner = next((t for t in e.top if t.storage != e.storage), None)
    return EvictionNumbers(
        completing_shortfall=completing.shortfall,
        completing_evicted=completing.evicted,
        completing_freed=completing.freed,
        step=e.step,
        shortfall=e.shortfall,
        rank=e.rank,
        score=e.score,
        candidates=e.candidates,
        runner_up=runner and runner.storage,
        runner_up_score=runner and runner.score,
    )


def _contrast_numbers(
    k: RankedDecision | None, failing: SameAllocation | None
) -> ContrastNumbers | None:
    if k is None:
        return None
    return ContrastNumbers(
        step=k.step,
        storage=k.storage,
        size=k.size,
        shortfall=k.shortfall,
        op=failing.op,
        failing_shortfall=failing.shortfall,
        failing_evicted=failing.evicted,
        failing_freed=failing.freed,
    )


def _sentences(m: Mechanism) -> list[str]:
    return [
        _lead(m),
        *_contrast_sentence(m),
        *_eviction_sentence(m),
        _failure_sentence(m),
        _retention_sentence(m),
    ]


def _lead(m: Mechanism) -> str:
    """The first sentence: the budget difference, the storage, its removal and the failure."""
    diff, f = m.budget_difference, m.failure
    head = f"The failing budget has {_bytes(abs(diff))} {'more' if diff >= 0 else 'less'} than"
    head += f" the completing one, {'yet' if diff >= 0 else 'and'} its run"
    fails = f"fails ({f.outcome.upper()})"
    if m.storage is None:
        return f"{head} {fails} at step {f.step} without an eviction decision of its own."
    what = f"{m.storage} ({m.size:,} bytes) at step {m.removed_at_step}"
    removes = "evicts" if m.removed_by == "evict" else "frees"
    n = m.steps_until_failure
    if m.needed_at_step is None:
        return (
            f"{head} first departs from the completing run's decisions by evicting {what} and"
            f" {fails} {_later(n)}, at step {f.step}."
        )
    if n == 0:
        return f"{head} {removes} {what} and {fails} in that same step, which needs it again."
    return (
        f"{head} {removes} {what} and {fails} {_later(n)}, when step {m.needed_at_step}"
        f" needs {m.storage} again."
    )


def _later(steps: int) -> str:
    return "in the same step" if steps == 0 else f"{steps} step{'s' * (steps != 1)} later"


def _contrast_sentence(m: Mechanism) -> list[str]:
    k = m.contrast
    if m.storage is None:
        return []
    if k is None:
        return [
            "Up to that step the completing run evicts nothing that the failing run still holds."
        ]
    text = (
        f"At step {k.step} the completing run, {_bytes(k.shortfall)} short, evicts"
        f" {k.storage} ({k.size:,} bytes), which the failing run keeps"
    )
    short, evicted = k.failing_shortfall, k.failing_evicted
    if short is None:
        return [f"{text}."]
    same = f"{text}: at the same allocation (operator {k.op}) it"
    if short <= 0:
        spare = "exactly" if short == 0 else f"with {_bytes(-short)} to spare"
        return [f"{same} fits {spare}."]
    if m.storage in evicted:
        return [f"{same} is {_bytes(short)} short and evicts {m.storage} instead."]
    spare = k.failing_freed - short
    return [
        f"{same} is {_bytes(short)} short, evicts {_names(evicted)} and fits with"
        f" {_bytes(spare)} to spare."
    ]


def _bytes(n: int) -> str:
    return f"{n:,} byte{'s' * (n != 1)}"


def _names(storages: tuple[str, ...], most: int = 3) -> str:
    more = len(storages) - most
    return ", ".join(storages[:most]) + (f" and {more} more" if more > 0 else "")


def _eviction_sentence(m: Mechanism) -> list[str]:
    e, storage = m.eviction, m.storage
    if storage is None:
        return []
    if e is None:
        how = "freed" if m.removed_by == "free" else "evicted"
        return [f"The failing run {how} {storage} at step {m.removed_at_step}."]
    head = f"Short by {_bytes(e.shortfall)} at step {e.step}, the failing run"
    score = f"score {_score(e.score)}"
    if e.rank == 1 and e.runner_up is not None:
        text = (
            f"{head} ranks {storage} first of {e.candidates:,} candidates ({score}), just"
            f" ahead of {e.runner_up} ({_score(e.runner_up_score)}), and evicts it"
        )
    else:
        rank = f"ranked {e.rank} of" if e.rank else "among"
        text = f"{head} evicts {storage}, {rank} {e.candidates:,} candidates ({score})"
    return [f"{text}{_completing_there(m)}."]


def _completing_there(m: Mechanism) -> str:
    """What the completing run did at the allocation where the failing one evicted the storage,
    unless the contrasting decision said it already."""
    e, k = m.eviction, m.contrast
    short = e.completing_shortfall
    if short is None or (k is not None and k.storage in e.completing_evicted):
        return ""
    if short <= 0:
        spare = "exactly" if short == 0 else f"with {_bytes(-short)} to spare"
        return f"; at the same allocation the completing run fits {spare}"
    spare = e.completing_freed - short
    return (
        f"; at the same allocation the completing run, {_bytes(short)} short, evicts"
        f" {_names(e.completing_evicted)} and fits with {_bytes(spare)} to spare"
    )


def _failure_sentence(m: Mechanism) -> str:
    f = m.failure
    state = f"{f.depth} rematerializations deep with {f.pinned:,} bytes pinned"
    if f.outcome == "oom":
        end = (
            f"operator {f.op}'s request of {f.request:,} bytes is"
            f" {f.over_budget:,} bytes over the budget (OOM)"
        )
    else:
        end = f"the run stops at operator {f.op} ({f.outcome.upper()})"
    if m.needed_at_step is None:
        return f"At step {f.step}, {state}, {end}."
    return f"Step {f.step} rebuilds {m.storage}: the cascade nests {state}, and {end}."


def _retention_sentence(m: Mechanism) -> str:
    r = m.retention
    if r is None:
        return "No storage was removed whose retention could be tried."
    control = (
        "a control retaining nothing fails exactly as before"
        if r.valid
        else "a control retaining nothing does not reproduce the failure: the test is invalid"
    )
    if r.outcome == OK:
        return (
            f"Retaining {m.storage} (never an eviction candidate), the failing budget"
            f" completes with overhead {r.overhead:.4f}; {control}."
        )
    return (
        f"Retaining {m.storage} (never an eviction candidate) does not rescue the failing"
        f" budget ({r.outcome.upper()}); {control}."
    )


SHOWN = 12  # rows per list in the Markdown reading; the JSON has them all


def markdown(x: Explanation) -> str:
    """A reading of one explanation, numbers from its parts only."""
    ok, fail, d, c = x.ok, x.fail, x.divergence, x.cascade
    lines = [
        f"## {x.trace} · {x.policy}: {_budget(ok)} completes, {_budget(fail)} fails"
        f" ({fail.outcome})",
        "",
        f"**Mechanism.** {x.mechanism.text}",
        "",
        "### 1. Divergence",
        f"Both runs make the same first {d.common_prefix} eviction decisions; decision"
        f" {d.common_prefix} differs: completing run {_choice(d.ok)}, failing run"
        f" {_choice(d.fail)}.",
        "",
        "| run | evictions before | remats before | evictions after | remats after |",
        "|---|---|---|---|---|",
        *(
            f"| {run} | {before.evictions} | {before.rematerializations}"
            f" | {after.evictions} | {after.rematerializations} |"
            for run, before, after in (
                ("ok", d.before.ok, d.after.ok),
                ("fail", d.before.fail, d.after.fail),
            )
        ),
        "",
        f"The failing run stops at operator {c.op} (step {c.step}): it asks for"
        f" {c.request:,} bytes with {c.pinned:,} bytes pinned at nesting depth {c.depth},"
        f" {c.over_budget:,} bytes over the budget.",
        "",
        *_probe_lines(x.probe, _decisive_rows(x.decisive)),
        *_cascade_lines(c),
        *_retention_lines(x.retention),
    ]
    return "\n".join(lines) + "\n"


def _budget(run: RunSummary) -> str:
    ratio = f" ({run.ratio:.6f} of peak)" if run.ratio is not None else ""
    return f"{run.budget:,} bytes{ratio}"


def _choice(d: Decision | None) -> str:
    if d is None:
        return "makes no further decision"
    return f"evicts {d.storage} ({d.size:,} bytes) at operator {d.op}, step {d.step}"


def _decisive_rows(d: Decisive | None) -> dict[str, list[tuple[str, RankedDecision]]]:
    """Per run, its decisive decisions with the mark the listing gives them."""
    rows: dict[str, list[tuple[str, RankedDecision]]] = {"ok": [], "fail": []}
    if d is None:
        return rows
    if d.contrast is not None:
        rows["ok"].append(("contrast: the failing run keeps it", d.contrast))
    if d.eviction is not None:
        why = "the failure rebuilds it" if d.needed_at_step is not None else "first to differ"
        rows["fail"].append((f"evicts {d.storage}: {why}", d.eviction))
    return rows


def _probe_lines(p: Probe, decisive: dict[str, list[tuple[str, RankedDecision]]]) -> list[str]:
    lines = [
        f"### 2. Decision probe (steps {p.first_step}–{p.last_step})",
        "",
        "Each run's decisive decisions come first (**marked**), then its last decisions.",
        "",
        "| run | decision | step | op | shortfall | chosen (rank / candidates) | top candidates:"
        " storage e* size staleness \\|e*\\| score |",
        "|---|---|---|---|---|---|---|",
    ]
    for run, probed in (("ok", p.ok), ("fail", p.fail)):
        marked = {d.decision for _, d in decisive[run]}
        lines += [_decision_row(run, d, mark) for mark, d in decisive[run]]
        decisions = [d for d in probed.decisions if d.decision not in marked]
        hidden = len(decisions) - SHOWN
        if hidden > 0:
            lines.append(f"| {run} | … {hidden} earlier decisions in the JSON | | | | | |")
        lines += [_decision_row(run, d) for d in decisions[-SHOWN:]]
        if probed.omitted:
            lines.append(
                f"| {run} | … {probed.omitted} decisions in the window's middle, not listed"
                " | | | | | |"
            )
    return [*lines, ""]


def _decision_row(run: str, d: RankedDecision, mark: str | None = None) -> str:
    top = "<br>".join(
        f"{c.storage} {c.e_star:,} {c.size:,} {c.staleness:,} {c.neighbourhood} {_score(c.score)}"
        for c in d.top
    )
    chosen = f"{d.storage} ({d.rank or '–'} / {d.candidates})"
    if mark:
        chosen = f"**{chosen}: {mark}**"
    return f"| {run} | {d.decision} | {d.step} | {d.op} | {d.shortfall:,} | {chosen} | {top} |"


def _score(score: object) -> str:
    return score if isinstance(score, str) else f"{score:.4g}"


def _cascade_lines(c: Cascade) -> list[str]:
    frames = c.rebuilding
    lines = [
        "### 3. Cascade",
        "",
        f"At the failure {len(frames)} rematerializations were in progress (outermost first);"
        " each storage with how the failing run last removed it (evicted by a decision, or"
        " freed when its last reference was released).",
        "",
        "| storage | operator | depth | bytes | removed by | decision | at step | steps before"
        " failure | first evicted in the completing run at step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    shown = frames if len(frames) <= SHOWN else frames[: SHOWN // 2] + frames[-SHOWN // 2 :]
    for i, f in enumerate(shown):
        if len(frames) > SHOWN and i == SHOWN // 2:
            lines.append(f"| … {len(frames) - SHOWN} more in the JSON | | | | | | | | |")
        lines.append(
            f"| {f.storage} | {f.op} | {f.depth} | {_maybe(f.size)} |"
            f" {f.removed_by or '–'} | {_maybe(f.evicted_by_decision)} |"
            f" {_maybe(f.evicted_at_step)} | {_maybe(f.steps_before_failure)} |"
            f" {_maybe(f.ok_run_first_evicted_at_step)} |"
        )
    return [*lines, ""]


def _maybe(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _retention_lines(r: Retention | None) -> list[str]:
    if r is None:
        return ["### 4. Retention", "", "No storage to retain: nothing was rebuilt or chosen.", ""]
    i, c = r.intervention, r.control
    verdict = (
        "The control replays the failure exactly: the intervention is valid."
        if r.valid
        else "**The control does not replay the failure: the intervention is invalid.**"
    )
    return [
        "### 4. Retention",
        "",
        f"Retaining {r.storage} (never an eviction candidate, its bytes stay under the same"
        f" budget): {i.outcome}, overhead {i.overhead:.4f}, {i.evictions} evictions."
        f" Control retaining nothing: {c.outcome}, {c.evictions} evictions. {verdict}",
        "",
    ]
