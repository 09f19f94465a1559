"""The simulator's public functions: simulate a trace under a budget, its peak, budgets by ratio."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numba
import numpy as np
from numba.core.errors import NumbaError, UnsupportedBytecodeError

from simulator import centrality as central
from simulator import kernel
from simulator.errors import PolicyError, UserError
from simulator.events import Events
from simulator.layout import S_ROOT, Layout, build_layout
from simulator.policies import Policy, get_policy, score_set
from simulator.result import OK, OOM, THRASHED, Failure, Result
from simulator.scoring import UNCENTRAL, ScoreSet
from simulator.trace import Trace

_UNBOUNDED = int(kernel.NO_LIMIT)
_OUTCOMES = {kernel.DONE: OK, kernel.OOM: OOM, kernel.THRASHED: THRASHED}


@lru_cache(maxsize=16)
def _layout(trace: Trace) -> Layout:
    return build_layout(trace)


@dataclass(frozen=True, eq=False)
class Options:
    """How a replay runs, besides its trace and budget. Every entry point takes one, or its
    policy with the other fields by keyword: `simulate(trace, budget, "dtr", overhead_cap=2)`.

    `policy`: a built-in's name (or simrd's class name), `file.py:name`, or a Policy. `params`:
    the policy's parameters by name (the others take their defaults). `overhead_cap` stops a
    run as `thrashed` once rematerialization compute exceeds model_compute × (cap − 1), checked
    where simrd checks `remat_limit`. `centrality`: the storages' betweenness for policies that
    read it, when already computed (else computed). `retain`: storages (by root tensor name)
    never offered to the policy as eviction candidates, an intervention; with none retained
    the replay is simrd's.
    """

    policy: str | Policy = "dtr"
    params: Mapping[str, float] | None = None
    overhead_cap: float | None = None
    centrality: np.ndarray | None = None
    retain: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        cap = self.overhead_cap
        if cap is not None and not (_is_number(cap) and cap >= 1):
            raise UserError("overhead cap", "a number >= 1", repr(cap))
        object.__setattr__(self, "retain", tuple(self.retain))

    @classmethod
    def of(cls, given: Options | str | Policy, fields: dict[str, Any]) -> Options:
        """`given` with `fields` replaced, or the options running policy `given` with `fields`."""
        if isinstance(given, Options):
            return replace(given, **fields) if fields else given
        return cls(given, **fields)


def simulate(
    trace: Trace, budget: int, options: Options | str | Policy = "dtr", **fields: Any
) -> Result:
    """Replay `trace` under `budget` bytes with an eviction policy, as simrd's eager runtime would.

    `options`: an Options, or its policy with the other fields of Options by keyword.
    """
    budget, options = _budget(budget), Options.of(options, fields)
    return _replay(trace, budget, options, record=False, window=(0, -1), top=-1)[0]


def prepare(trace: Trace, options: Options | str | Policy = "dtr", **fields: Any) -> None:
    """Make `simulate` ready for this trace and policy without replaying anything: the
    trace's layout is built and the kernel loaded from its cache (or compiled) for the
    argument types the replay will pass."""
    _Setup.of(trace, Options.of(options, fields)).prepare()


def simulate_events(
    trace: Trace,
    budget: int,
    options: Options | str | Policy = "dtr",
    *,
    candidates: tuple[int, int] | None = None,
    top: int | None = None,
    **fields: Any,
) -> tuple[Result, Events]:
    """`simulate`, and the replay's events; decisions at steps `candidates[0]` to
    `candidates[1]` (schedule indices of the operators run, inclusive) list every candidate
    with its score components or, given `top`, only the `top` best the scan evaluated and a
    ranking event (memory stays small however many candidates a thrashing run scores)."""
    window = (0, -1)
    if candidates is not None:
        window = tuple(_whole(step, "step window", "a step index") for step in candidates)
    top = -1 if top is None else _whole(top, "top", "a number of candidates")
    budget, options = _budget(budget), Options.of(options, fields)
    return _replay(trace, budget, options, record=True, window=window, top=top)


@dataclass(frozen=True)
class _Setup:
    """Everything a replay of one trace and policy needs but the budget, resolved once."""

    trace: Trace
    layout: Layout
    policy: Policy
    params: tuple[tuple[str, float], ...]
    cap: float | None
    setting: kernel.Setting  # what the kernel runs under, its budget set by `run`
    scores: ScoreSet  # the compiled score set holding the policy

    @classmethod
    def of(cls, trace: Trace, options: Options) -> _Setup:
        chosen = get_policy(options.policy)
        resolved = chosen.resolve(options.params)
        values = np.array([value for _, value in resolved] or [0.0], dtype=np.float64)
        ranks = _ranks(trace, chosen, dict(resolved), options.centrality)
        cap = options.overhead_cap
        limit = math.inf if cap is None else trace.model_compute * (cap - 1)
        index, scores = score_set(chosen)
        setting = kernel.Setting(
            budget=0,
            remat_limit=float(limit),
            policy=index,
            params=values,
            ranks=ranks,
            regions=chosen.regions,
            eqclass=chosen.eqclass,
        )
        setup = cls(trace, _layout(trace), chosen, resolved, cap, setting, scores)
        return setup.retaining(options.retain)

    def retaining(self, names: Iterable[str]) -> _Setup:
        """This setup with the named storages never candidates (ranked below 0); itself when
        none are named (no index of the storages' names is built)."""
        names = list(names)
        if not names:
            return self
        ranks = self.setting.ranks.copy()
        ranks[_storages(self.trace, names)] = -1
        return replace(self, setting=self.setting._replace(ranks=ranks))

    @property
    def commands(self) -> int:
        return self.layout.cmds.shape[1]

    def start(self, saved: _Saved | None = None, record: bool = False):
        """Where a replay begins: (command, state, work, uf) from a saved state or, without
        one, from the schedule's start, recording events when `record`."""
        if saved is not None:
            return saved.command, *saved.restore()
        state = kernel.new_state(self.layout, self.setting.regions)
        state.g[kernel.EV_ON] = record
        return 0, state, *kernel.new_work(self.layout, state, self.setting.eqclass)

    def prepare(self) -> None:
        """Load or compile the kernel for the arguments `run` passes, running nothing."""
        _, state, work, uf = self.start()
        arguments = (self.layout, state, work, uf, self.setting, self.scores, 0, 0)
        with self.policy_errors():
            kernel.replay.compile(tuple(numba.typeof(a) for a in arguments))

    def run(self, state, work, uf, budget: int, start: int, stop: int):
        """Commands start..stop - 1 of the schedule: (kernel status, work, uf)."""
        p, setting = self.policy, self.setting._replace(budget=budget)
        if p.source is None:  # a built-in: nothing to catch (and no context on the hot path)
            status, work, uf = self._kernel_replay(state, work, uf, setting, start, stop)
        else:
            with self.policy_errors():
                status, work, uf = self._kernel_replay(state, work, uf, setting, start, stop)
        if status == kernel.INVALID_CHOICE:
            raise AssertionError(f"policy {p.name} chose a storage outside the evictable pool")
        return status, work, uf

    def _kernel_replay(self, state, work, uf, setting: kernel.Setting, start: int, stop: int):
        return kernel.replay(self.layout, state, work, uf, setting, self.scores, start, stop)

    @contextmanager
    def policy_errors(self):
        """A policy from a file that numba cannot compile, or whose score raises in the
        kernel: a PolicyError naming its file and line. A built-in's are bugs: they pass."""
        if self.policy.source is None:
            yield
            return
        where = f"{self.policy.analysis.file}:{self.policy.analysis.line}"
        try:
            yield
        except (NumbaError, UnsupportedBytecodeError) as error:
            first = str(error).strip().splitlines()[0]
            expected = "a score the kernel compiles (numbers, math, if/else)"
            raise PolicyError(where, expected, first) from None
        except (ArithmeticError, ValueError) as error:
            found = f"{type(error).__name__}: {error}"
            raise PolicyError(where, "a score that does not raise", found) from None

    def result(self, state, status, work, budget: int) -> tuple[Result, Events]:
        g = state.g
        status = kernel.DONE if status == kernel.RUNNING else status
        log, rows = work[2][: g[kernel.N_EVICTED]], work[3][: g[kernel.EV_N]]
        result = _result(self, state, status, log, budget)
        return result, Events(rows, _storage_names(self.trace), self.trace.tensor_names)


def _replay(trace: Trace, budget: int, options: Options, record: bool, window, top: int):
    setup = _Setup.of(trace, options)
    _, state, work, uf = setup.start(record=record)
    state.g[kernel.EV_FIRST_STEP], state.g[kernel.EV_LAST_STEP] = window
    state.g[kernel.EV_TOP] = top
    status, work, uf = setup.run(state, work, uf, budget, 0, setup.commands)
    return setup.result(state, status, work, budget)


class Replayer:
    """`simulate` of one trace and policy at budget after budget, resuming from saved state.

    A replay saves its state at `saves` evenly spaced points of the schedule (between
    commands, where nothing is in progress) and keeps the last one taken before the comparison
    that last lowered its certified interval's upper end. That state's own certified interval
    holds every budget whose replay reaches it identically; a later replay at such a budget
    (the next tile of a map: the previous run's upper end + 1) continues from it. Results are
    those of `simulate`, field for field.
    """

    def __init__(
        self,
        trace: Trace,
        options: Options | str | Policy = "dtr",
        *,
        saves: int = 16,
        **fields: Any,
    ):
        self.setup = _Setup.of(trace, Options.of(options, fields))
        n = self.setup.commands
        self.cuts = sorted({n * k // saves for k in range(saves)} | {n})
        self.saved: _Saved | None = None
        self.resumed_at = 0  # the command the last replay started from

    def simulate(self, budget: int) -> Result:
        budget = _budget(budget)
        setup, saved = self.setup, self.saved
        resumable = saved is not None and saved.lo <= budget <= saved.hi
        start, state, work, uf = setup.start(saved if resumable else None)
        self.resumed_at, keep, status = start, None, kernel.RUNNING
        for a, b in zip(self.cuts, self.cuts[1:], strict=False):
            if a < start:
                continue
            here, hi = _Saved.take(a, state, work, uf), state.g[kernel.HI]
            status, work, uf = setup.run(state, work, uf, budget, a, b)
            if state.g[kernel.HI] < hi:
                keep = here
            if status != kernel.RUNNING:
                break
        self.saved = keep if keep is not None else self.saved
        return setup.result(state, status, work, budget)[0]


class Recording:
    """`simulate_events` of one run (no candidates listed), with states saved along the way,
    so that the candidates of a few of its decisions (`candidates`) are replayed from the
    nearest saved state instead of from the start.

    A state is saved between commands (at most every SEGMENT commands) once `spacing`
    decisions were made since the last one; whenever more than `keep` are held, every other
    one is dropped and the spacing doubles.
    Memory stays bounded, and a listing replays at most about 2 / keep of the run's decisions
    before its first one.
    """

    SEGMENT = 64  # commands replayed between two chances to save

    def __init__(
        self,
        trace: Trace,
        budget: int,
        options: Options | str | Policy = "dtr",
        *,
        keep: int = 24,
        spacing: int = 1024,
        **fields: Any,
    ):
        self.budget = _budget(budget)
        self.setup = _Setup.of(trace, Options.of(options, fields))
        _, state, work, uf = self.setup.start(record=True)
        state.g[kernel.EV_LAST_STEP] = -1  # no candidates
        self.saved: list[_Saved] = []
        self._listings: dict[tuple, Events] = {}
        since = 0
        status = kernel.RUNNING
        for a in range(0, self.setup.commands, self.SEGMENT):
            if state.g[kernel.N_EVICTED] - since >= spacing:
                self.saved.append(_Saved.take(a, state, work, uf))
                since = self.saved[-1].decisions
                if len(self.saved) > keep:
                    self.saved, spacing = self.saved[1::2], 2 * spacing
            status, work, uf = self._segment(state, work, uf, a)
            if status != kernel.RUNNING:
                break
        self.result, self.events = self.setup.result(state, status, work, self.budget)
        # Per storage, the first decision that retaining it can change (see `retained`).
        log = work[2][: state.g[kernel.N_EVICTED]]
        evicted = np.full(state.sv.shape[1], kernel.NO_LIMIT, dtype=np.int64)
        np.minimum.at(evicted, log, np.arange(len(log)))
        passed = state.sv[kernel.PASSED]
        self._alike = np.where(passed > 0, np.minimum(evicted, passed - 1), evicted)

    def retained(self, storage: str) -> Result:
        """The run with `storage` (a root tensor name) never a candidate, as `simulate` with
        `retain=[storage]` gives it, continued from the last state saved before the first
        decision that retaining it can change: the recorded run's first eviction of it, or the
        first time TwoPhase's k largest held it unchosen (another storage could have taken its
        place). Before that decision every scan makes its choice without it: a scan keeps its
        best candidate, and the storage was not. The prefix is the recorded run's, so
        heuristic_evals counts the storage's evaluations in it, and budget_lo and budget_hi
        its comparisons with it; every other field is `simulate`'s."""
        setup = self.setup.retaining([storage])
        (s,) = _storages(self.setup.trace, [storage])
        start, state, work, uf = setup.start(self._saved_before(self._alike[s]))
        state.g[kernel.EV_ON] = state.g[kernel.EV_N] = 0
        status, work, uf = setup.run(state, work, uf, self.budget, start, setup.commands)
        return setup.result(state, status, work, self.budget)[0]

    def _segment(self, state, work, uf, command: int):
        stop = min(command + self.SEGMENT, self.setup.commands)
        return self.setup.run(state, work, uf, self.budget, command, stop)

    def candidates(
        self,
        steps: tuple[int, int],
        decisions: tuple[int, int],
        top: int,
        omit: tuple[int, int] | None = None,
    ) -> Events:
        """Events of the run replayed from the last state saved before decision
        `decisions[0]` (numbered from 0) until decision `decisions[1]` is made, the decisions
        numbered `decisions[0]`..`decisions[1]` made at steps `steps[0]`..`steps[1]`, except
        those numbered `omit[0]`..`omit[1]`, with their `top` best candidates and a ranking, as
        `simulate_events` lists them. Past the first omitted decision the replay skips ahead to
        the last state saved before the decision after the omitted ones, if that is later, and
        leaves out the events in between. A listing asked for again is not replayed again."""
        key = (steps, decisions, top, omit)
        if key not in self._listings:
            self._listings[key] = self._list(*key)
        return self._listings[key]

    def _list(self, steps, decisions, top, omit) -> Events:
        listing = (steps, decisions, top, omit or (kernel.NO_LIMIT, 0))
        command, state, work, uf = self._listing(self._saved_before(decisions[0]), *listing)
        skipped: list[np.ndarray] = []  # the events recorded before skipping ahead
        skip, status = omit is not None, kernel.RUNNING
        while status == kernel.RUNNING and command < self.setup.commands:
            status, work, uf = self._segment(state, work, uf, command)
            command += self.SEGMENT
            made = state.g[kernel.N_EVICTED]
            if made > decisions[1]:
                break
            if skip and made > omit[0]:
                skip, ahead = False, self._saved_before(omit[1] + 1)
                if ahead is not None and ahead.command > command:
                    skipped.append(work[3][: state.g[kernel.EV_N]])
                    command, state, work, uf = self._listing(ahead, *listing)
        events = self.setup.result(state, status, work, self.budget)[1]
        return replace(events, rows=np.concatenate([*skipped, events.rows]))

    def _saved_before(self, decision: int) -> _Saved | None:
        """The last state saved before `decision` (numbered from 0) was made."""
        before = [saved for saved in self.saved if saved.decisions <= decision]
        return before[-1] if before else None

    def _listing(self, saved, steps, decisions, top, omit):
        """A replay from `saved` (None: the start) recording only the listing's events."""
        command, state, work, uf = self.setup.start(saved, record=True)
        g = state.g
        g[kernel.EV_N], g[kernel.EV_TOP] = 0, top  # a saved state's events stay behind
        g[kernel.EV_FIRST_STEP], g[kernel.EV_LAST_STEP] = steps
        g[kernel.EV_FIRST_DECISION], g[kernel.EV_LAST_DECISION] = decisions
        g[kernel.EV_OMIT_FIRST], g[kernel.EV_OMIT_LAST] = omit
        return command, state, work, uf


@dataclass(frozen=True)
class _Saved:
    """A replay's state between commands: before `command`, for budgets `lo`..`hi`."""

    command: int
    lo: int
    hi: int
    arrays: tuple[np.ndarray, ...]  # the state's, the eviction log, union-find parents, values
    scratch: tuple[np.ndarray, np.ndarray]  # frames and snap: empty between commands

    @classmethod
    def take(cls, command: int, state: kernel.State, work, uf) -> _Saved:
        arrays = tuple(a.copy() for a in (*state, work[2], *uf))
        g = state.g
        return cls(command, int(g[kernel.LO]), int(g[kernel.HI]), arrays, work[:2])

    @property
    def decisions(self) -> int:
        """How many eviction decisions the replay had made."""
        return int(self.arrays[0][kernel.N_EVICTED])

    def restore(self):
        arrays = [a.copy() for a in self.arrays]
        state, log, uf = kernel.State(*arrays[:5]), arrays[5], tuple(arrays[6:])
        return state, (*self.scratch, log, np.zeros((0, kernel.EV_COLS))), uf


def _ranks(trace: Trace, policy: Policy, params: dict, given: np.ndarray | None) -> np.ndarray:
    """Storages' centrality ranks for policies that can lock by them, else all zero (a copy)."""
    locks = policy.rule != UNCENTRAL or params["alpha"] or params["floor"]
    if policy.centrality and locks:
        seed = int(params.get("seed", central.DEFAULT_SEED))
        values = central.betweenness(trace, seed) if given is None else given
        return central.ranks(values)
    return np.zeros(_layout(trace).stor.shape[1] - 1, dtype=np.int64)


@lru_cache(maxsize=16)
def _storage_names(trace: Trace) -> tuple[str, ...]:
    return tuple(trace.tensor_names[t] for t in _layout(trace).stor[S_ROOT][:-1])


def _storages(trace: Trace, names: Iterable[str]) -> list[int]:
    """Storage ids by root tensor name; an unknown name is a UserError."""
    names = list(names)
    index = {name: s for s, name in enumerate(_storage_names(trace))}
    missing = [name for name in names if name not in index]
    if missing:
        raise UserError("retain", "storages named by their root tensor", repr(missing[0]))
    return [index[name] for name in names]


def _result(setup: _Setup, state, status, log, budget) -> Result:
    trace, layout = setup.trace, setup.layout
    g = [int(x) for x in state.g]
    names = [trace.tensor_names[t] for t in layout.stor[S_ROOT][log]]
    failure = None
    if status != kernel.DONE:
        failure = Failure(
            op=g[kernel.FAIL_OP],
            request=g[kernel.FAIL_REQ],
            pinned=g[kernel.FAIL_PINNED],
            depth=g[kernel.FAIL_DEPTH],
            over_budget=g[kernel.FAIL_OVER],
        )
    total = g[kernel.MODEL_C] + g[kernel.REMAT_C]
    return Result(
        trace=trace.name,
        trace_sha256=trace.sha256,
        policy=setup.policy.name,
        params=setup.params,
        budget=budget,
        overhead_cap=setup.cap,
        outcome=_OUTCOMES[status],
        clock=g[kernel.CLOCK],
        model_compute=g[kernel.MODEL_C],
        remat_compute=g[kernel.REMAT_C],
        overhead=total / trace.model_compute if trace.model_compute else 1.0,
        peak_memory=g[kernel.PEAK],
        evictions=g[kernel.EVICTIONS],
        eager_frees=g[kernel.EAGER],
        rematerializations=g[kernel.REMATS],
        heuristic_evals=g[kernel.EVALS],
        lock_fallbacks=g[kernel.FALLBACKS],
        eviction_seq_sha256=hashlib.sha256("\n".join(names).encode()).hexdigest(),
        first_evictions=tuple(names[:50]),
        last_evictions=tuple(names[-20:]),
        max_depth=g[kernel.MAX_DEPTH],
        peak_pinned=g[kernel.PEAK_PINNED],
        peak_pinned_depth=g[kernel.PEAK_PINNED_DEPTH],
        failure=failure,
        budget_lo=g[kernel.LO],
        budget_hi=None if g[kernel.HI] == _UNBOUNDED else g[kernel.HI],
    )


def peak_memory(trace: Trace) -> int:
    """Peak memory of an unconstrained replay (simrd's RuntimeV2EagerOptimized, infinite budget)."""
    return simulate(trace, _UNBOUNDED - 1, "dtr").peak_memory


def budget_for(trace: Trace | None, ratio: float, peak: int | None = None) -> int:
    """The study's budget for a ratio of the peak: `int(peak * ratio)`, as Python computes it.

    `peak` defaults to the trace's peak memory; given, the trace is not needed.
    """
    if not (_is_number(ratio) and 0 <= ratio < 1e6):
        raise UserError("ratio", "a number from 0 to 1e6", repr(ratio))
    peak = peak_memory(trace) if peak is None else _whole(peak, "peak", "a number of bytes")
    return int(peak * ratio)


def _is_number(x: object) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


def _budget(x: object) -> int:
    return _whole(x, "budget", f"an integer number of bytes from 0 to {_UNBOUNDED - 1}")


def _whole(x: object, what: str, expected: str) -> int:
    """x as a Python int in [0, 2**62), numpy integers included; anything else is a UserError."""
    if not isinstance(x, int | np.integer) or isinstance(x, bool) or not 0 <= x < _UNBOUNDED:
        raise UserError(what, expected, repr(x))
    return int(x)
