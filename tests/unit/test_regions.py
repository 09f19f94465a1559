"""The kernel's exactness stamps: a region stamped exact equals its rebuild from scratch.

Regions stamped exact are updated without a search when a storage of theirs is recomputed
(`kernel._shrink`); a stamp on a region that a rebuild would change makes the replay drift
from simrd. Replaying a trace one command at a time, every stamped region of every material,
unpinned storage is rebuilt and compared, on random traces with joins and aliases (where simrd's
kept regions can drift from a rebuild) and on ResNet-32.
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


def _drifted(state: kernel.State, layout, s: int, forward: bool) -> bool:
    """Whether s's region differs from its rebuild; the state is left as it was."""
    g, sv, bits, scratch = state.g, state.sv, state.bits, state.scratch
    planes, values = PLANES[forward], VALUES[forward]
    kept_bits = bits[list(planes), s, :].copy()
    kept_values = sv[list(values), s].copy()
    kernel.rebuild(s, forward, g, sv, layout.stor, layout.flat, bits, scratch)
    drifted = not (
        np.array_equal(bits[list(planes), s, :], kept_bits)
        and np.array_equal(sv[list(values), s], kept_values)
    )
    bits[list(planes), s, :] = kept_bits
    sv[list(values), s] = kept_values
    return drifted


def _stamped_regions_checked(trace: Trace, policy: str, budget: int) -> int:
    """Replay command by command; assert every stamped region equals its rebuild; count them."""
    setup = _Setup.of(trace, policy, None, None, None, ())
    _, state, work, uf = setup.start()
    sv, checked = state.sv, 0
    for i in range(setup.commands):
        status, work, uf = setup.run(state, work, uf, budget, i, i + 1)
        for s in np.flatnonzero(sv[kernel.MATERIAL] & (sv[kernel.PINNED] == 0)):
            for forward in (True, False):
                stamp, due = STAMPS[forward]
                if sv[stamp, s] == state.g[kernel.EXACT] and not sv[due, s]:
                    assert not _drifted(state, setup.layout, int(s), forward), (i, s, forward)
                    checked += 1
        if status != kernel.RUNNING:
            break
    return checked


@pytest.mark.parametrize("policy", ["dtr", "he-star"])
def test_stamped_regions_equal_their_rebuild_on_random_traces(policy: str) -> None:
    checked = 0
    for seed in range(40):
        trace = tiny_trace(random_trace_text(seed, 60, joins=True))
        peak = peak_memory(trace)
        for budget in (peak // 4, peak // 3, peak // 2):
            checked += _stamped_regions_checked(trace, policy, budget)
    assert checked > 1000  # the stamps are in use, so the check is not vacuous


def test_stamped_regions_equal_their_rebuild_on_resnet32(load_named) -> None:
    resnet32 = load_named("resnet32")
    budget = int(peak_memory(resnet32) * 0.3)
    assert _stamped_regions_checked(resnet32, "dtr", budget) > 1000
