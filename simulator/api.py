"""The simulator's public functions: simulate a trace under a budget, its peak, budgets by ratio."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from simulator import centrality as central
from simulator import kernel
from simulator.errors import UserError
from simulator.events import Events
from simulator.layout import S_ROOT, Layout, build_layout
from simulator.policies import Policy, get_policy
from simulator.result import OK, OOM, THRASHED, Failure, Result
from simulator.trace import Trace

_UNBOUNDED = int(kernel.NO_LIMIT)
_OUTCOMES = {kernel.DONE: OK, kernel.OOM: OOM, kernel.THRASHED: THRASHED}


@lru_cache(maxsize=16)
def _layout(trace: Trace) -> Layout:
    return build_layout(trace)


def simulate(
    trace: Trace,
    budget: int,
    policy: str = "dtr",
    params: dict[str, float] | None = None,
    overhead_cap: float | None = None,
    centrality: np.ndarray | None = None,
    retain: Iterable[str] = (),
) -> Result:
    """Replay `trace` under `budget` bytes with an eviction policy, as simrd's eager runtime would.

    `overhead_cap` stops a run as `thrashed` once rematerialization compute exceeds
    model_compute × (cap − 1), checked where simrd checks `remat_limit`. `centrality`: the
    storages' betweenness for policies that read it, when already computed (else computed).
    `retain`: storages (by root tensor name) never offered to the policy as eviction
    candidates, an intervention; with none retained the replay is simrd's.
    """
    options = (policy, params, overhead_cap, centrality, retain)
    return _replay(trace, budget, *options, record=False, window=(0, -1))[0]


def simulate_events(
    trace: Trace,
    budget: int,
    policy: str = "dtr",
    params: dict[str, float] | None = None,
    overhead_cap: float | None = None,
    centrality: np.ndarray | None = None,
    retain: Iterable[str] = (),
    candidates: tuple[int, int] | None = None,
) -> tuple[Result, Events]:
    """`simulate`, and the replay's events; decisions at steps `candidates[0]` to
    `candidates[1]` (schedule indices of the operators run, inclusive) list every candidate
    with its score components."""
    window = (0, -1)
    if candidates is not None:
        window = tuple(_whole(step, "step window", "a step index") for step in candidates)
    options = (policy, params, overhead_cap, centrality, retain)
    return _replay(trace, budget, *options, record=True, window=window)


def _replay(trace, budget, policy, params, cap, centrality, retain, record, window):
    budget = _whole(budget, "budget", f"an integer number of bytes from 0 to {_UNBOUNDED - 1}")
    if cap is not None and not (_is_number(cap) and cap >= 1):
        raise UserError("overhead cap", "a number >= 1", repr(cap))
    chosen = get_policy(policy)
    resolved = chosen.resolve(params)
    limit = math.inf if cap is None else trace.model_compute * (cap - 1)
    layout = _layout(trace)
    state = kernel.new_state(layout, chosen.regions)
    state.g[kernel.EV_ON] = record
    state.g[kernel.EV_FIRST_STEP], state.g[kernel.EV_LAST_STEP] = window
    values = np.array([value for _, value in resolved] or [0.0], dtype=np.float64)
    ranks = _ranks(trace, chosen, dict(resolved), centrality)
    ranks[_storages(trace, retain)] = -1
    status, log, rows = kernel.replay(
        layout,
        state,
        budget,
        (chosen.rule, values, ranks),
        float(limit),
        chosen.regions,
        chosen.eqclass,
    )
    if status == kernel.INVALID_CHOICE:
        raise AssertionError(f"policy {chosen.name} chose a storage outside the evictable pool")
    result = _result(trace, layout, state, status, log, budget, chosen.name, resolved, cap)
    return result, Events(rows, _storage_names(trace), trace.tensor_names)


def _ranks(trace: Trace, policy: Policy, params: dict, given: np.ndarray | None) -> np.ndarray:
    """Storages' centrality ranks for policies that can lock by them, else all zero (a copy)."""
    if policy.centrality and (params["alpha"] or params["floor"]):
        values = central.betweenness(trace, int(params["seed"])) if given is None else given
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


def _result(trace, layout, state, status, log, budget, policy, params, cap) -> Result:
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
        policy=policy,
        params=params,
        budget=budget,
        overhead_cap=cap,
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


def _whole(x: object, what: str, expected: str) -> int:
    """x as a Python int in [0, 2**62), numpy integers included; anything else is a UserError."""
    if not isinstance(x, int | np.integer) or isinstance(x, bool) or not 0 <= x < _UNBOUNDED:
        raise UserError(what, expected, repr(x))
    return int(x)
