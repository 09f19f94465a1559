"""Why a budget fails where another completes: divergence, decision probe, cascade, retention."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator import Events, Recording, Result, Trace, UserError, simulate
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
        return Recording(self.trace, budget, *self._options())

    def replay(self, budget: int) -> Result:
        """The budget's plain run, `simulate`'s."""
        return simulate(self.trace, budget, *self._options())

    def _options(self) -> tuple:
        return self.policy, dict(self.params), self.overhead_cap, self.centrality


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
) -> dict:
    """The four parts of an explanation, as a JSON-ready dict (see `markdown` for a reading).

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
    return {
        "trace": pair.trace.name,
        "trace_sha256": pair.trace.sha256,
        "policy": fail.policy,
        "params": dict(fail.params),
        "overhead_cap": pair.overhead_cap,
        "peak_memory": pair.peak,
        "ok": summary(ok, pair.peak),
        "fail": summary(fail, pair.peak),
        "divergence": divergence,
        "probe": _probe(
            recorded, window or _default_window(target, divergence, cascade), top, decisions
        ),
        "cascade": cascade,
        "retention": _retention(pair, runs, fail, target, control),
    }


def _default_window(target: dict | None, divergence: dict, cascade: dict) -> tuple[int, int]:
    """From the step that evicted the storage to retain (else the divergence) to the failure."""
    last = cascade["step"]
    for start in ((target or {}).get("evicted_at_step"), divergence["step"]):
        if start is not None:
            return min(start, last), last
    return last, last


def summary(r: Result, peak: int | None) -> dict:
    """What an explanation states of one run."""
    return {
        "budget": r.budget,
        "ratio": r.budget / peak if peak else None,
        "outcome": r.outcome,
        "overhead": r.overhead,
        "evictions": r.evictions,
        "rematerializations": r.rematerializations,
        "max_depth": r.max_depth,
        "eviction_seq_sha256": r.eviction_seq_sha256,
    }


def _divergence(ok: Events, fail: Events) -> dict:
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
    return {
        "common_prefix": common,
        "step": min(d["step"] for d in first) if first else None,
        "ok": _decision(at["ok"]),
        "fail": _decision(at["fail"]),
        "before": {name: _counts(e, 0, split[name]) for name, e in events.items()},
        "after": {name: _counts(e, split[name], len(e)) for name, e in events.items()},
    }


def _decision(d: dict | None) -> dict | None:
    if d is None:
        return None
    keys = ("decision", "step", "op", "storage", "size", "score", "shortfall")
    return {k: _json_number(d[k]) for k in keys}


def _counts(events: Events, start: int, end: int) -> dict:
    return {
        "evictions": events.count("evict", start, end),
        "rematerializations": events.count("remat", start, end),
    }


def _cascade(fail: Result, events: Events, ok_events: Events) -> dict:
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
    return {
        "step": failure["step"],
        "op": failure["op"],
        "outcome": fail.outcome,
        "request": failure["request"],
        "pinned": failure["pinned"],
        "depth": failure["depth"],
        "over_budget": failure["over_budget"],
        "rebuilding": [
            _rebuilt(events.event(at), removed[i], ok_evicted[i], failure)
            for i, at in enumerate(stack)
        ],
    }


def _by_storage(events: Events, kinds: tuple[str, ...], storages: np.ndarray, last: bool):
    """For each storage (by index), its last (or first) event of these kinds, or None."""
    positions = events.where(*kinds)
    of = events.values(positions, "storage")
    if last:
        positions, of = positions[::-1], of[::-1]
    seen, first = np.unique(of, return_index=True)
    at = dict(zip(seen.tolist(), positions[first].tolist(), strict=True))
    return [events.event(at[s]) if s in at else None for s in storages.tolist()]


def _rebuilt(frame: dict, last: dict | None, in_ok: dict | None, failure: dict) -> dict:
    """A storage being rebuilt, with how it last left memory (`last`: evicted by a decision or
    freed when its last reference was released; a freed storage is still rebuilt as a parent)
    and the completing run's first eviction of it (`in_ok`)."""
    return {
        "storage": frame["storage"],
        "op": frame["op"],
        "depth": frame["depth"],
        "size": last and last["size"],
        "removed_by": last and last["kind"],
        "evicted_by_decision": last and last.get("decision"),
        "evicted_at_step": last and last["step"],
        "steps_before_failure": last and failure["step"] - last["step"],
        "ok_run_first_evicted_at_step": in_ok and in_ok["step"],
    }


def _target(cascade: dict, divergence: dict) -> dict | None:
    """The storage to retain: the outermost one the failure had to rebuild, else the failing
    run's first differing choice."""
    if cascade["rebuilding"]:
        return cascade["rebuilding"][0]
    chosen = divergence["fail"]
    if chosen is None:
        return None
    return {"storage": chosen["storage"], "evicted_at_step": chosen["step"]}


def _probe(
    recorded: dict[str, Recording], window: tuple[int, int], top: int, decisions: int | None
) -> dict:
    """Each run's decisions at the window's steps, with the top-ranked candidates, and what
    each step of the window did."""
    runs = {name: _probed(r, window, top, decisions) for name, r in recorded.items()}
    return {"first_step": window[0], "last_step": window[1], "top": top, **runs}


def _probed(recorded: Recording, window: tuple[int, int], top: int, most: int | None) -> dict:
    """One run's part of the probe: at most `most` of its decisions in the window, the first
    and last halves, each with its best candidates (replayed from the recording's nearest
    saved state), how many were left out, and what each step of the window did."""
    events = recorded.events
    numbers = events.values(events.where("decision", steps=window), "decision").astype(int)
    omitted = 0 if most is None else max(0, len(numbers) - most)
    listed = []
    if len(numbers):  # one replay lists both halves
        span = (int(numbers[0]), int(numbers[-1]))
        omit = (int(numbers[most // 2]), int(numbers[most // 2 + omitted - 1])) if omitted else None
        listed = _decisions(recorded.candidates(window, span, top, omit))
    return {"decisions": listed, "omitted": omitted, "steps": _steps(events, window)}


def _steps(events: Events, window: tuple[int, int]) -> list[dict]:
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
        at(e["step"])["failed"] = {"op": e["op"], "outcome": e["outcome"], "depth": e["depth"]}
    return [steps[step] for step in sorted(steps)]


def _ints(events: Events, positions: np.ndarray, *names: str) -> list[list[int]]:
    return [events.values(positions, name).astype(int).tolist() for name in names]


def _decisions(events: Events) -> list[dict]:
    """The decisions listed with candidates, from a replay that kept the best few of each
    (`Recording.candidates`): candidates are those the policy could choose, in pool order up to
    the first zero score (where a scan stops), ranked by score, ties to the later one. The
    chosen storage's rank is None where the policy orders otherwise (TwoPhase's cover test)."""
    listed: list[dict] = []
    positions = events.where("candidate", "ranking", "decision")
    decided = np.flatnonzero(events.values(positions, "kind") == KINDS.index("decision"))
    begins = np.concatenate(([0], decided + 1))[: len(decided)]  # after the decision before
    inside = begins != decided  # a ranking before it: listed
    begins, decided = begins[inside], decided[inside]
    for begin, at in zip(begins.tolist(), decided.tolist(), strict=True):
        ranking = events.event(int(positions[at - 1]))
        best = positions[begin : at - 1]
        order = np.lexsort((-np.arange(len(best)), events.values(best, "score")))
        listed.append(
            {
                **_decision(events.event(int(positions[at]))),
                "rank": ranking["rank"] or None,
                "candidates": ranking["evaluated"],
                "top": [_candidate(events.event(int(c))) for c in best[order]],
            }
        )
    return listed


def _candidate(c: dict) -> dict:
    keys = ("storage", "e_star", "size", "staleness", "neighbourhood", "score")
    return {k: _json_number(c[k]) for k in keys}


def _json_number(value: object) -> object:
    """Scores can be infinite (a storage of 0 bytes); JSON has no infinity."""
    return "inf" if isinstance(value, float) and math.isinf(value) else value


def _retention(
    pair: Pair, runs: Runs, fail: Result, target: dict | None, control: Result | None
) -> dict | None:
    """Rerun the failing budget with the target never a candidate; a control retaining nothing
    (the plain run, replayed unless given) must give the failure exactly."""
    if target is None:
        return None
    retained = runs.retain(pair, pair.fail, target["storage"])
    control = control if control is not None else runs.retain(pair, pair.fail, None)
    return {
        "storage": target["storage"],
        "intervention": summary(retained, pair.peak),
        "control": summary(control, pair.peak),
        "control_reproduces_failure": control == fail,
        "valid": control == fail,
        "retaining_completes": retained.outcome == OK,
    }


SHOWN = 12  # rows per list in the Markdown reading; the JSON has them all


def markdown(x: dict) -> str:
    """A reading of one explanation, numbers from the dict only."""
    ok, fail, d, c = x["ok"], x["fail"], x["divergence"], x["cascade"]
    lines = [
        f"## {x['trace']} · {x['policy']}: {_budget(ok)} completes, {_budget(fail)} fails"
        f" ({fail['outcome']})",
        "",
        "### 1. Divergence",
        f"Both runs make the same first {d['common_prefix']} eviction decisions; decision"
        f" {d['common_prefix']} differs: completing run {_choice(d['ok'])}, failing run"
        f" {_choice(d['fail'])}.",
        "",
        "| run | evictions before | remats before | evictions after | remats after |",
        "|---|---|---|---|---|",
        *(
            f"| {run} | {d['before'][run]['evictions']} | {d['before'][run]['rematerializations']}"
            f" | {d['after'][run]['evictions']} | {d['after'][run]['rematerializations']} |"
            for run in ("ok", "fail")
        ),
        "",
        f"The failing run stops at operator {c['op']} (step {c['step']}): it asks for"
        f" {c['request']:,} bytes with {c['pinned']:,} bytes pinned at nesting depth {c['depth']},"
        f" {c['over_budget']:,} bytes over the budget.",
        "",
        *_probe_lines(x["probe"]),
        *_cascade_lines(c),
        *_retention_lines(x["retention"]),
    ]
    return "\n".join(lines) + "\n"


def _budget(run: dict) -> str:
    ratio = f" ({run['ratio']:.6f} of peak)" if run["ratio"] is not None else ""
    return f"{run['budget']:,} bytes{ratio}"


def _choice(d: dict | None) -> str:
    if d is None:
        return "makes no further decision"
    return f"evicts {d['storage']} ({d['size']:,} bytes) at operator {d['op']}, step {d['step']}"


def _probe_lines(p: dict) -> list[str]:
    lines = [
        f"### 2. Decision probe (steps {p['first_step']}–{p['last_step']})",
        "",
        "| run | decision | step | op | shortfall | chosen (rank / candidates) | top candidates:"
        " storage e* size staleness \\|e*\\| score |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in ("ok", "fail"):
        decisions = p[run]["decisions"]
        for d in decisions[-SHOWN:]:
            top = "<br>".join(
                f"{c['storage']} {c['e_star']:,} {c['size']:,} {c['staleness']:,}"
                f" {c['neighbourhood']} {_score(c['score'])}"
                for c in d["top"]
            )
            lines.append(
                f"| {run} | {d['decision']} | {d['step']} | {d['op']} | {d['shortfall']:,}"
                f" | {d['storage']} ({d['rank'] or '–'} / {d['candidates']}) | {top} |"
            )
        hidden = len(decisions) - SHOWN
        if hidden > 0:
            lines.append(f"| {run} | … {hidden} earlier decisions in the JSON | | | | | |")
        if p[run]["omitted"]:
            lines.append(
                f"| {run} | … {p[run]['omitted']} decisions in the window's middle, not listed"
                " | | | | | |"
            )
    return [*lines, ""]


def _score(score: object) -> str:
    return score if isinstance(score, str) else f"{score:.4g}"


def _cascade_lines(c: dict) -> list[str]:
    frames = c["rebuilding"]
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
            f"| {f['storage']} | {f['op']} | {f['depth']} | {_maybe(f['size'])} |"
            f" {f['removed_by'] or '–'} | {_maybe(f['evicted_by_decision'])} |"
            f" {_maybe(f['evicted_at_step'])} | {_maybe(f['steps_before_failure'])} |"
            f" {_maybe(f['ok_run_first_evicted_at_step'])} |"
        )
    return [*lines, ""]


def _maybe(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _retention_lines(r: dict | None) -> list[str]:
    if r is None:
        return ["### 4. Retention", "", "No storage to retain: nothing was rebuilt or chosen.", ""]
    i, c = r["intervention"], r["control"]
    verdict = (
        "The control replays the failure exactly: the intervention is valid."
        if r["valid"]
        else "**The control does not replay the failure: the intervention is invalid.**"
    )
    return [
        "### 4. Retention",
        "",
        f"Retaining {r['storage']} (never an eviction candidate, its bytes stay under the same"
        f" budget): {i['outcome']}, overhead {i['overhead']:.4f}, {i['evictions']} evictions."
        f" Control retaining nothing: {c['outcome']}, {c['evictions']} evictions. {verdict}",
        "",
    ]
