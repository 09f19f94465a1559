"""The kernel's exactness stamps: a region stamped exact equals its rebuild from scratch.

Regions stamped exact are updated without a search when a storage of theirs is recomputed
(`kernel._shrink`); a stamp on a region that a rebuild would change makes the replay drift
from simrd. A just-computed storage's forward region can be owed with its stamp kept
(`kernel._ahead`), its frontier row then a superset of its rebuild's: a missing storage there
hides a reverse region that simrd updates. Replaying a trace one command at a time, every
stamped region of every material, unpinned storage is rebuilt and compared, on random traces
with joins and aliases (where simrd's kept regions can drift from a rebuild) and on ResNet-32.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulator import kernel, peak_memory
from simulator.api import _Setup
from simulator.trace import Trace
from tests.tracegen import random_trace_text, tiny_trace

PLANES = {True: (kernel.FWD_INT, kernel.FWD_FR), False: (kernel.REV_INT, kernel.REV_FR)}
VALUES = {True: (kernel.FWD_C, kernel.FWD_COUNT), False: (kernel.REV_C, kernel.REV_COUNT)}
STAMPS = {True: (kernel.FWD_EXACT, kernel.FWD_DUE), False: (kernel.REV_EXACT, kernel.REV_DUE)}


def _rebuilt(state: kernel.State, layout, s: int, forward: bool) -> tuple[np.ndarray, np.ndarray]:
    """s's region as a rebuild finds it (interior and frontier rows, compute and count); the
    state is left as it was."""
    g, sv, bits, scratch = state.g, state.sv, state.bits, state.scratch
    planes, values = list(PLANES[forward]), list(VALUES[forward])
    kept_bits, kept_values = bits[planes, s, :].copy(), sv[values, s].copy()
    kernel.rebuild(s, forward, g, sv, layout.stor, layout.flat, bits, scratch)
    rebuilt = bits[planes, s, :].copy(), sv[values, s].copy()
    bits[planes, s, :], sv[values, s] = kept_bits, kept_values
    return rebuilt


def _words(flags: np.ndarray, n_words: int) -> np.ndarray:
    """A row of bits (the kernel's layout) with bit s set where flags[s]."""
    padded = np.zeros(64 * n_words, bool)
    padded[: len(flags)] = flags
    return np.packbits(padded, bitorder="little").view(np.uint64)


def _stamped_regions_checked(trace: Trace, policy: str, budget: int) -> tuple[int, int]:
    """Replay command by command; assert that every stamped region equals its rebuild and that
    every owed forward region keeping its stamp holds its rebuild's frontier (pinned storages
    aside) in its frontier row; count both."""
    setup = _Setup.of(trace, policy, None, None, None, ())
    _, state, work, uf = setup.start()
    sv, bits, exact, owed = state.sv, state.bits, 0, 0
    for i in range(setup.commands):
        status, work, uf = setup.run(state, work, uf, budget, i, i + 1)
        pinned = _words(sv[kernel.PINNED] != 0, bits.shape[2])
        for s in np.flatnonzero(sv[kernel.MATERIAL] & (sv[kernel.PINNED] == 0)):
            for forward in (True, False):
                stamp, due = STAMPS[forward]
                if sv[stamp, s] != state.g[kernel.EXACT] or (sv[due, s] and not forward):
                    continue
                planes, values = list(PLANES[forward]), list(VALUES[forward])
                rows, rebuilt_values = _rebuilt(state, setup.layout, int(s), forward)
                if sv[due, s]:
                    missing = rows[1] & ~pinned & ~bits[kernel.FWD_FR, s, :]
                    assert not missing.any(), (i, s)
                    owed += 1
                else:
                    assert np.array_equal(rows, bits[planes, s, :]), (i, s, forward)
                    assert np.array_equal(rebuilt_values, sv[values, s]), (i, s, forward)
                    exact += 1
        if status != kernel.RUNNING:
            break
    return exact, owed


@pytest.mark.parametrize("policy", ["dtr", "he-star"])
def test_stamped_regions_equal_their_rebuild_on_random_traces(policy: str) -> None:
    exact = owed = 0
    for seed in range(40):
        trace = tiny_trace(random_trace_text(seed, 60, joins=True))
        peak = peak_memory(trace)
        for budget in (peak // 4, peak // 3, peak // 2):
            counts = _stamped_regions_checked(trace, policy, budget)
            exact, owed = exact + counts[0], owed + counts[1]
    assert exact > 1000 and owed > 100  # the stamps are in use, so the check is not vacuous


def test_stamped_regions_equal_their_rebuild_on_resnet32(load_named) -> None:
    resnet32 = load_named("resnet32")
    budget = int(peak_memory(resnet32) * 0.3)
    exact, owed = _stamped_regions_checked(resnet32, "dtr", budget)
    assert exact > 1000 and owed > 10
