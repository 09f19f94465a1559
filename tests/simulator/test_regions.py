"""The kernel's exactness stamps: a region stamped exact equals its rebuild from scratch.

Regions stamped exact are updated without a search when a storage of theirs is recomputed
(`kernel.refresh`); a stamp on a region that a rebuild would change makes the replay drift
from simrd. A just-computed storage's forward region can be owed with its stamp kept
(`kernel.refresh`), its frontier row then a superset of its rebuild's: a missing storage there
hides a reverse region that simrd updates. An input's forward region can lag behind the
outputs of the operator being run (`kernel.regions.lags`): it then equals its rebuild but for the
outputs it leads to, which the rebuild has in its interior. Replaying a trace one command at a
time, every stamped region of every material, unpinned storage is rebuilt and compared, on
random traces with joins and aliases (where simrd's kept regions can drift from a rebuild) and
on ResNet-32; a command that fails is left in the middle of its operator, with regions lagging.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from simulator import Options, kernel, peak_memory
from simulator.api import _Setup
from simulator.layout import OP_OUT, T_STORAGE
from simulator.trace import Trace
from tests.support.tracegen import random_trace_text, tiny_trace

PLANES = {True: (kernel.FWD_INT, kernel.FWD_FR), False: (kernel.REV_INT, kernel.REV_FR)}
VALUES = {True: (kernel.FWD_C, kernel.FWD_COUNT), False: (kernel.REV_C, kernel.REV_COUNT)}
STAMPS = {True: (kernel.FWD_EXACT, kernel.FWD_DUE), False: (kernel.REV_EXACT, kernel.REV_DUE)}


def _rebuilt(state: kernel.State, layout, s: int, forward: bool) -> tuple[np.ndarray, np.ndarray]:
    """s's region as a rebuild finds it (interior and frontier rows, compute and count); the
    state is left as it was."""
    g, sv, bits, scratch = state.g, state.sv, state.bits, state.scratch
    planes, values = list(PLANES[forward]), list(VALUES[forward])
    kept_bits, kept_fields = bits[planes, s, :].copy(), sv[:, s].copy()
    kernel.rebuild(s, forward, g, sv, layout.stor, layout.flat, bits, scratch)
    rebuilt = bits[planes, s, :].copy(), sv[values, s].copy()
    bits[planes, s, :], sv[:, s] = kept_bits, kept_fields
    return rebuilt


def _words(flags: np.ndarray, n_words: int) -> np.ndarray:
    """A row of bits (the kernel's layout) with bit s set where flags[s]."""
    padded = np.zeros(64 * n_words, bool)
    padded[: len(flags)] = flags
    return np.packbits(padded, bitorder="little").view(np.uint64)


def _pending(layout, op: int, n_storages: int) -> np.ndarray:
    """Flags of the storages of op's outputs."""
    flags = np.zeros(n_storages, bool)
    first, last = layout.ops[OP_OUT, op], layout.ops[OP_OUT, op + 1]
    flags[layout.tens[T_STORAGE, first:last]] = True
    return flags


def _checked(state: kernel.State, layout, running: int) -> np.ndarray:
    """Assert that every stamped region of a material, unpinned storage equals its rebuild (a
    lagging one but for the outputs it leads to, only within operator `running`, -1 for none)
    and that every owed forward region keeping its stamp holds its rebuild's frontier (pinned
    storages aside) in its frontier row; count exact, owed and lagging regions."""
    sv, bits, counts = state.sv, state.bits, np.zeros(3, int)
    pinned = _words(sv[kernel.PINNED] != 0, bits.shape[2])
    for s in np.flatnonzero(sv[kernel.MATERIAL] & (sv[kernel.PINNED] == 0)):
        for forward in (True, False):
            stamp, due = STAMPS[forward]
            if sv[stamp, s] != state.g[kernel.EXACT] or (sv[due, s] and not forward):
                continue
            planes, values = list(PLANES[forward]), list(VALUES[forward])
            rows, rebuilt_values = _rebuilt(state, layout, int(s), forward)
            if sv[due, s]:
                missing = rows[1] & ~pinned & ~bits[kernel.FWD_FR, s, :]
                assert not missing.any(), s
                counts[1] += 1
            elif forward and sv[kernel.FWD_LAG, s]:
                op = sv[kernel.FWD_LAG, s] - 1
                assert op == running, s
                pending = _pending(layout, op, sv.shape[1])
                interior = np.unpackbits(rows[0].view(np.uint8), bitorder="little")
                led = np.flatnonzero(pending & interior[: sv.shape[1]])
                assert len(led), s  # s leads to one at least: else it would not lag
                kept = rows[0] & ~_words(pending, bits.shape[2])
                assert np.array_equal(rows[1], bits[kernel.FWD_FR, s, :]), s
                assert np.array_equal(kept, bits[kernel.FWD_INT, s, :]), s
                missed = np.array([sv[kernel.COMPUTE, led].sum(), len(led)])
                assert np.array_equal(rebuilt_values - missed, sv[values, s]), s
                counts[2] += 1
            else:
                assert np.array_equal(rows, bits[planes, s, :]), (s, forward)
                assert np.array_equal(rebuilt_values, sv[values, s]), (s, forward)
                counts[0] += 1
    return counts


def _stamped_regions_checked(trace: Trace, policy: str, budget: int) -> np.ndarray:
    """Replay command by command, checking the state after each (see _checked)."""
    setup = _Setup.of(trace, Options(policy))
    _, state, work, uf = setup.start()
    counts = np.zeros(3, int)
    for i in range(setup.commands):
        status, work, uf = setup.run(state, work, uf, budget, i, i + 1)
        kind, arg = setup.layout.cmds[:, i]
        stopped = status != kernel.RUNNING and kind == kernel.COMPUTE_CMD
        counts += _checked(state, setup.layout, arg if stopped else -1)
        if status != kernel.RUNNING:
            break
    return counts


def _failed_checked(trace: Trace, policy: str, budgets) -> np.ndarray:
    """Replay at each budget; where the replay runs out of memory for an operator's outputs,
    in the middle of the operator, check the state it stops in."""
    setup = _Setup.of(trace, Options(policy))
    counts = np.zeros(3, int)
    for budget in budgets:
        _, state, work, uf = setup.start()
        status, work, uf = setup.run(state, work, uf, int(budget), 0, setup.commands)
        if status == kernel.OOM:
            counts += _checked(state, setup.layout, state.g[kernel.STEP])
    return counts


@functools.cache
def _random_traces() -> tuple[tuple[Trace, int], ...]:
    """Random traces with joins and aliases, with their peak memory (built once for all tests)."""
    traces = (tiny_trace(random_trace_text(seed, 60, joins=True)) for seed in range(40))
    return tuple((trace, peak_memory(trace)) for trace in traces)


@pytest.mark.parametrize("policy", ["dtr", "he-star"])
def test_stamped_regions_equal_their_rebuild_on_random_traces(policy: str) -> None:
    counts = np.zeros(3, int)
    for trace, peak in _random_traces():
        for budget in (peak // 4, peak // 3, peak // 2):
            counts += _stamped_regions_checked(trace, policy, budget)
    exact, owed, _ = counts
    assert exact > 1000 and owed > 100  # the stamps are in use, so the check is not vacuous


@pytest.mark.parametrize("policy", ["dtr", "he-star"])
def test_regions_where_an_operator_runs_out_of_memory_equal_their_rebuild(policy: str) -> None:
    counts = np.zeros(3, int)
    for trace, peak in _random_traces():
        counts += _failed_checked(trace, policy, np.linspace(peak // 8, peak // 2, 20))
    assert counts[2] > 20  # regions lagging behind an operator's outputs are checked


def test_stamped_regions_equal_their_rebuild_on_resnet32(load_named) -> None:
    resnet32 = load_named("resnet32")
    budget = int(peak_memory(resnet32) * 0.3)
    exact, owed, _ = _stamped_regions_checked(resnet32, "dtr", budget)
    assert exact > 1000 and owed > 10
