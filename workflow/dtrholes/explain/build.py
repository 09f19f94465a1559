"""Why a budget fails where another completes: the two runs, their divergence, the failure's cascade
and the retention experiment, built into an Explanation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dtrholes.explain.decisions import (
    decision_of,
    decisive_decisions,
    probe_decisions,
    retention_target,
)
from dtrholes.explain.mechanism import mechanism
from dtrholes.explain.types import (
    Cascade,
    CountsByRun,
    Decisive,
    Divergence,
    EventCounts,
    Explanation,
    Rebuilding,
    Retention,
    RunSummary,
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
    target = retention_target(cascade, divergence)
    decisive = decisive_decisions(recorded, target, cascade, top)
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
        probe=probe_decisions(recorded, window, top, decisions),
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
        ok=decision_of(at["ok"]),
        fail=decision_of(at["fail"]),
        before=CountsByRun(*(_counts(e, 0, split[name]) for name, e in events.items())),
        after=CountsByRun(*(_counts(e, split[name], len(e)) for name, e in events.items())),
    )


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
