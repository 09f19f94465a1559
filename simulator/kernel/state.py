"""The replay's state arrays and their vocabulary: the index of every scalar, row and plane."""

from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

import numpy as np

from simulator.layout import Layout

# Scalars in g
MEM, CLOCK, MODEL_C, REMAT_C, PEAK = 0, 1, 2, 3, 4
EVALS, EVICTIONS, EAGER, REMATS, DEPTH, MAX_DEPTH = 5, 6, 7, 8, 9, 10
PEAK_PINNED, PEAK_PINNED_DEPTH, POOL_HEAD, POOL_TAIL, POOL_BYTES = 11, 12, 13, 14, 15
LO, HI, FAIL_OP, FAIL_REQ, FAIL_PINNED, FAIL_DEPTH, FAIL_OVER = 16, 17, 18, 19, 20, 21, 22
N_NODES, N_EVICTED, FALLBACKS, N_DUE, N_LISTED = 23, 24, 25, 26, 27
EV_ON, EV_N, EV_FIRST_STEP, EV_LAST_STEP, LOCKED, STEP = 28, 29, 30, 31, 32, 33
EXACT = 34  # the stamp of regions that equal their rebuild from scratch (see regions.is_exact)
EV_TOP = 35  # candidates kept per decision in the window (-1: every one; see recording)
EV_FIRST_DECISION, EV_LAST_DECISION = 36, 37  # and only these decisions' (numbered from 0)
EV_OMIT_FIRST, EV_OMIT_LAST = 38, 39  # but not these (none when first > last)
N_SCALARS = 40

# Rows of sv, one column per storage
LAST, COMPUTE, FWD_C, REV_C, NODE, REF_INT, REF_EXT, NEXT, PREV = 0, 1, 2, 3, 4, 5, 6, 7, 8
N_TENSORS, N_FWD, N_REV, MATERIAL, PINNED, IN_POOL = 9, 10, 11, 12, 13, 14
FWD_COUNT, REV_COUNT = 15, 16  # storages in each region's interior (|e*| = their sum)
FWD_DUE, REV_DUE = 17, 18  # the region's rebuild is deferred until it is read (see regions.owe)
LISTED, DUE_LIST = 19, 20  # storages that may owe a rebuild: flag, and the first N_LISTED ids
FWD_EXACT, REV_EXACT = 21, 22  # g[EXACT] when the region is known to equal its rebuild
PASSED = 23  # 1 + the first decision whose TwoPhase k largest held s unchosen (0: none yet)
FWD_LAG = 24  # 1 + the operator whose pending outputs the forward region lags behind (see lags)
EVICTED = 25  # evictions of the storage by the policy so far
N_FIELDS = 26

# Planes of bits: interior and frontier of each storage's forward and reverse region
FWD_INT, FWD_FR, REV_INT, REV_FR = 0, 1, 2, 3

RUNNING, DONE, OOM, THRASHED, INVALID_CHOICE = 0, 1, 2, 3, 4
COMPUTE_CMD, GET_CMD, PIN_CMD = 0, 1, 2  # else RELEASE (see trace.py)
NO_LIMIT = np.int64(2**62)

# Event kinds, the first column of an event row (see simulator/events.py for the other columns)
EV_ALLOC, EV_DECISION, EV_CANDIDATE, EV_EVICT, EV_REMAT, EV_REBUILT, EV_FREE, EV_FAIL = range(8)
EV_RANKING = 8
EV_COLS = 11  # kind, eight values, a kind's extra value, the step (see simulator/events.py)

State = namedtuple("State", ["g", "sv", "defined", "bits", "scratch"])


class Setting(NamedTuple):
    """What one call of `replay` runs under, its policy resolved once by the caller: the
    budget, the rematerialization compute above which the run is thrashed, the policy's id in
    its compiled score set (which travels beside, see loop.replay), its float64 parameters in
    its order, each storage's int64 rank (centrality for TControlInspired, 0 = most central,
    else 0; below 0: retained, never a candidate), and whether the policy reads regions and
    equivalence classes (then the replay maintains them)."""

    budget: int
    remat_limit: float
    policy: int
    params: np.ndarray
    ranks: np.ndarray
    regions: bool
    eqclass: bool


def new_state(layout: Layout, regions: bool) -> State:
    """Fresh state for one replay; region bitsets only when the policy reads regions."""
    n_s, n_t = layout.stor.shape[1] - 1, layout.tens.shape[1]
    g = np.zeros(N_SCALARS, dtype=np.int64)
    g[CLOCK], g[POOL_HEAD], g[POOL_TAIL], g[HI], g[FAIL_OP] = 1, -1, -1, NO_LIMIT, -1
    g[EXACT], g[EV_LAST_DECISION], g[EV_OMIT_FIRST] = 1, NO_LIMIT, NO_LIMIT
    sv = np.zeros((N_FIELDS, n_s), dtype=np.int64)
    sv[NEXT] = sv[PREV] = sv[NODE] = -1
    shape = (4, n_s, (n_s + 63) // 64) if regions else (4, 1, 1)
    return State(
        g=g,
        sv=sv,
        defined=np.zeros(n_t, np.uint8),
        bits=np.zeros(shape, np.uint64),
        # A stack or list of storages (rebuilds, members, neighbours: at most 2 n_s), and past
        # its first n_s + 1 entries (a rebuild's stack) the storages an operator makes material.
        scratch=np.zeros(2 * n_s + 2, np.int64),
    )


def new_work(L: Layout, st: State, eqclass: bool):
    """A replay's growing arrays besides its state: `work` = (frames, snap, eviction log,
    events) and the union-find of equivalence classes `uf` = (parents, values)."""
    work = (
        np.zeros((L.tens.shape[1] + 1, 6), np.int64),
        np.zeros(len(L.flat) + 1, np.int64),
        np.zeros(1024, np.int64),
        np.zeros((1024 if st.g[EV_ON] else 0, EV_COLS)),
    )
    n_nodes = 2 * st.sv.shape[1] + 16 if eqclass else 1
    return work, (np.zeros(n_nodes, np.int64), np.zeros(n_nodes, np.int64))


# What the package exports of this module: the vocabulary, the state and how to make one.
__all__ = [name for name in dict(globals()) if name.isupper()] + [
    "Setting",
    "State",
    "new_state",
    "new_work",
]
