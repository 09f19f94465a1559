"""An explanation's mechanism: its story in numbers and in sentences a reader can quote, derived
from the explanation's other parts only (the audit derives it again)."""

from __future__ import annotations

import dataclasses

from dtrholes.explain.types import (
    Cascade,
    ContrastNumbers,
    Decisive,
    EvictionNumbers,
    FailurePoint,
    Mechanism,
    RankedDecision,
    Retention,
    RetentionNumbers,
    RunSummary,
    SameAllocation,
)
from simulator.result import OK, OOM


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
    score = f"score {score_text(e.score)}"
    if e.rank == 1 and e.runner_up is not None:
        text = (
            f"{head} ranks {storage} first of {e.candidates:,} candidates ({score}), just"
            f" ahead of {e.runner_up} ({score_text(e.runner_up_score)}), and evicts it"
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
    if f.outcome == OOM:
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


def score_text(score: object) -> str:
    return score if isinstance(score, str) else f"{score:.4g}"
