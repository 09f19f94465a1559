"""The caching-allocator model: every rule of PyTorch 1.7's allocator on hand-traced sequences,
the same model against a plain reference on random ones, and replays of traces through it.

Addresses are the model's: segments are laid out one after another from 0, in the order they
were allocated. A segment's layout is listed as (address, size, in use) per block.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import UserError, peak_memory
from simulator.allocator import (
    ALLOC_STEP,
    NO_BLOCK,
    AllocationSequence,
    CachingAllocator,
    OutOfMemory,
    allocation_sequence,
    kLargeBuffer,
    kMinBlockSize,
    kMinLargeAlloc,
    kRoundLarge,
    kSmallBuffer,
    kSmallSize,
    replay,
    replay_trace,
    round_size,
)
from tests.support.naive_allocator import NaiveAllocator
from tests.support.tracegen import call, constant, line, release, tiny_trace, trace_text

KiB, MiB = 1 << 10, 1 << 20
DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


def counts(a: CachingAllocator) -> tuple[int, int, int]:
    s = a.stats()
    return s.allocated, s.reserved, s.segments


def test_constants_are_pytorchs() -> None:
    assert (kMinBlockSize, kSmallSize, kSmallBuffer) == (512, 1 * MiB, 2 * MiB)
    assert (kLargeBuffer, kMinLargeAlloc, kRoundLarge) == (20 * MiB, 10 * MiB, 2 * MiB)


# ---------------------------------------------------------------- rounding and pools
@pytest.mark.parametrize(
    ("request_", "charged"), [(1, 512), (511, 512), (512, 512), (513, 1024), (1000, 1024)]
)
def test_sizes_round_up_to_512_bytes(request_: int, charged: int) -> None:
    a = CachingAllocator()
    h = a.malloc(request_)
    assert a.size(h) == charged == round_size(request_)
    assert counts(a) == (charged, 2 * MiB, 1)


def test_a_zero_byte_request_allocates_nothing() -> None:
    a = CachingAllocator()
    assert a.malloc(0) == NO_BLOCK
    a.free(NO_BLOCK)
    assert counts(a) == (0, 0, 0) and a.segments() == []


def test_one_mib_is_small_one_mib_and_512_bytes_is_large() -> None:
    a = CachingAllocator()
    small = a.malloc(1 * MiB)
    assert a.segments() == [[(0, 1 * MiB, True), (1 * MiB, 1 * MiB, False)]]
    large = a.malloc(1 * MiB + 1)  # rounds to 1 MiB + 512: the large pool, a 20 MiB segment
    assert a.size(large) == 1 * MiB + 512
    assert counts(a) == (2 * MiB + 512, 22 * MiB, 2)
    a.free(small)
    a.free(large)
    # Each pool serves only its own requests: the free 20 MiB block does not take a small one,
    # nor the free 2 MiB small segment a large one.
    a.malloc(512)
    a.malloc(1536 * KiB)
    assert [[b[:2] for b in s if b[2]] for s in a.segments()] == [
        [(0, 512)],
        [(2 * MiB, 1.5 * MiB)],
    ]
    assert counts(a) == (1536 * KiB + 512, 22 * MiB, 2)


# ---------------------------------------------------------------- segment sizes on a miss
@pytest.mark.parametrize(
    ("request_", "segment"),
    [
        (1, 2 * MiB),
        (1 * MiB, 2 * MiB),
        (1 * MiB + 1, 20 * MiB),
        (10 * MiB - 512, 20 * MiB),
        (10 * MiB - 511, 10 * MiB),  # rounds to 10 MiB: from there, rounded up to 2 MiB
        (10 * MiB, 10 * MiB),
        (10 * MiB + 1, 12 * MiB),
        (12 * MiB, 12 * MiB),
        (100 * MiB + 3, 102 * MiB),
    ],
)
def test_a_miss_allocates_a_segment_of_pytorchs_size(request_: int, segment: int) -> None:
    a = CachingAllocator()
    a.malloc(request_)
    assert a.stats().reserved == segment
    assert a.stats().segments == 1


# ---------------------------------------------------------------- best fit
def three_free_large_blocks() -> CachingAllocator:
    """Free large blocks of 12, 14 and 12 MiB, at 0, 12 and 26 MiB, each a whole segment."""
    a = CachingAllocator()
    handles = [a.malloc(12 * MiB), a.malloc(14 * MiB), a.malloc(12 * MiB)]
    for h in handles:
        a.free(h)
    assert a.segments() == [
        [(0, 12 * MiB, False)],
        [(12 * MiB, 14 * MiB, False)],
        [(26 * MiB, 12 * MiB, False)],
    ]
    return a


def test_best_fit_takes_the_smallest_fitting_block_the_lowest_address_on_ties() -> None:
    a = three_free_large_blocks()
    h = a.malloc(11 * MiB)  # 12 MiB at 0 and at 26 MiB fit best: the lower address wins
    assert a.segments()[0] == [(0, 12 * MiB, True)]
    assert a.size(h) == 12 * MiB  # a remainder of 1 MiB is not split off (see below)
    a.malloc(12 * MiB + 1)  # 12 MiB + 512 fits only the 14 MiB block
    assert a.segments()[1] == [
        (12 * MiB, 12 * MiB + 512, True),
        (24 * MiB + 512, 2 * MiB - 512, False),
    ]
    a.malloc(12 * MiB)  # the 12 MiB block at 26 MiB, exactly
    assert a.segments()[2] == [(26 * MiB, 12 * MiB, True)]
    assert counts(a) == (36 * MiB + 512, 38 * MiB, 3)


def test_a_request_no_free_block_fits_allocates_a_segment() -> None:
    a = three_free_large_blocks()
    a.malloc(15 * MiB)
    assert counts(a) == (16 * MiB, 54 * MiB, 4)
    assert a.segments()[3] == [(38 * MiB, 16 * MiB, True)]


# ---------------------------------------------------------------- splitting
def test_the_small_pool_splits_off_a_remainder_of_512_bytes() -> None:
    a = CachingAllocator()
    a.malloc(1 * MiB)  # leaves 1 MiB free at 1 MiB
    h = a.malloc(1 * MiB - 512)  # remainder 512 >= kMinBlockSize: split
    assert a.size(h) == 1 * MiB - 512
    assert a.segments() == [
        [(0, 1 * MiB, True), (1 * MiB, 1 * MiB - 512, True), (2 * MiB - 512, 512, False)]
    ]
    a.malloc(1)  # the 512 bytes left, exactly: nothing to split
    assert counts(a) == (2 * MiB, 2 * MiB, 1)
    assert a.stats().largest_free == 0


def test_the_large_pool_keeps_a_remainder_of_one_mib_and_splits_one_of_one_mib_and_512() -> None:
    a = CachingAllocator()
    whole = a.malloc(11 * MiB)  # a 12 MiB segment; remainder 1 MiB, not > kSmallSize
    assert a.size(whole) == 12 * MiB
    assert a.segments() == [[(0, 12 * MiB, True)]]
    split = a.malloc(11 * MiB - 512)  # a 12 MiB segment; remainder 1 MiB + 512: split
    assert a.size(split) == 11 * MiB - 512
    assert a.segments()[1] == [
        (12 * MiB, 11 * MiB - 512, True),
        (23 * MiB - 512, 1 * MiB + 512, False),
    ]
    assert counts(a) == (23 * MiB - 512, 24 * MiB, 2)


def test_a_reused_block_up_to_one_mib_too_big_is_charged_whole() -> None:
    a = CachingAllocator()
    a.free(a.malloc(4 * MiB))  # a 20 MiB segment, whole again
    h = a.malloc(19 * MiB)  # remainder 1 MiB: the whole 20 MiB is charged
    assert a.size(h) == 20 * MiB
    assert counts(a) == (20 * MiB, 20 * MiB, 1)


def test_splitting_keeps_the_front_and_leaves_the_rest_at_the_higher_addresses() -> None:
    a = CachingAllocator()
    a.malloc(3 * MiB)
    a.malloc(5 * MiB)
    assert a.segments() == [
        [(0, 3 * MiB, True), (3 * MiB, 5 * MiB, True), (8 * MiB, 12 * MiB, False)]
    ]


# ---------------------------------------------------------------- coalescing
def test_a_freed_block_joins_its_free_neighbours_on_both_sides() -> None:
    a = CachingAllocator()
    x, y, z = a.malloc(512), a.malloc(512), a.malloc(512)
    rest = (1536, 2 * MiB - 1536, False)
    a.free(x)  # its next neighbour is in use: no merge
    assert a.segments() == [[(0, 512, False), (512, 512, True), (1024, 512, True), rest]]
    a.free(z)  # joins the free rest after it
    assert a.segments() == [[(0, 512, False), (512, 512, True), (1024, 2 * MiB - 1024, False)]]
    assert a.stats().largest_free == 2 * MiB - 1024
    a.free(y)  # joins both: the segment is one free block again
    assert a.segments() == [[(0, 2 * MiB, False)]]
    assert counts(a) == (0, 2 * MiB, 1)


def test_blocks_of_adjacent_segments_never_join() -> None:
    a = CachingAllocator()
    a.malloc(1 * MiB)
    tail = a.malloc(1 * MiB)  # the rest of the first segment: [1 MiB, 2 MiB)
    head = a.malloc(1 * MiB)  # a second segment at 2 MiB: [2 MiB, 3 MiB)
    a.free(tail)
    a.free(head)
    assert a.segments() == [
        [(0, 1 * MiB, True), (1 * MiB, 1 * MiB, False)],
        [(2 * MiB, 2 * MiB, False)],
    ]
    assert a.stats().largest_free == 2 * MiB  # not the 3 MiB the addresses would allow


def test_freeing_a_block_not_in_use_is_an_error() -> None:
    a = CachingAllocator()
    h = a.malloc(512)
    a.free(h)
    with pytest.raises(ValueError, match="not in use"):
        a.free(h)


# ---------------------------------------------------------------- capacity
def test_at_capacity_the_cached_segments_are_released_and_the_segment_retried() -> None:
    a = CachingAllocator(capacity=21 * MiB)
    a.free(a.malloc(2 * MiB))  # a 20 MiB segment, cached whole
    a.malloc(512)  # 20 + 2 MiB > 21 MiB: release the cached segment, then 2 MiB fits
    s = a.stats()
    assert (s.allocated, s.reserved, s.segments) == (512, 2 * MiB, 1)
    assert (s.retries, s.segment_allocs, s.segment_frees, s.ooms) == (1, 2, 1, 0)
    assert s.peak_reserved == 20 * MiB


def test_a_segment_that_fills_the_capacity_exactly_fits() -> None:
    a = CachingAllocator(capacity=22 * MiB)
    a.malloc(2 * MiB)
    a.malloc(512)
    assert counts(a) == (2 * MiB + 512, 22 * MiB, 2) and a.stats().retries == 0


def test_out_of_memory_when_even_the_released_cache_leaves_too_little() -> None:
    a = CachingAllocator(capacity=22 * MiB)
    a.malloc(2 * MiB)  # its 20 MiB segment is split and in use: never released
    a.free(a.malloc(512))  # a 2 MiB small segment, cached whole
    assert counts(a) == (2 * MiB, 22 * MiB, 2)
    with pytest.raises(OutOfMemory, match="tried to allocate 19922944 bytes"):
        a.malloc(19 * MiB)  # the 18 MiB free is too small; a new 20 MiB segment fits neither
        # beside the 22 MiB reserved nor beside the 20 MiB left once the small one is released
    s = a.stats()
    assert (s.allocated, s.reserved, s.segments) == (2 * MiB, 20 * MiB, 1)
    assert (s.retries, s.segment_frees, s.ooms) == (1, 1, 1)


def test_without_a_capacity_nothing_is_ever_released() -> None:
    a = CachingAllocator()
    for h in [a.malloc(size) for size in (3 * MiB, 19 * MiB, 31 * MiB)]:
        a.free(h)
    assert counts(a) == (0, 20 * MiB + 20 * MiB + 32 * MiB, 3)
    a.empty_cache()
    assert counts(a) == (0, 0, 0) and a.stats().segment_frees == 3


# ---------------------------------------------------------------- counters
def test_counters_after_each_step() -> None:
    a = CachingAllocator()
    steps = []
    x = a.malloc(3 * MiB)  # a 20 MiB segment, 17 MiB free after it
    steps.append(a.stats())
    y = a.malloc(5 * MiB)  # from the 17 MiB: 12 MiB free
    steps.append(a.stats())
    a.free(x)  # 3 MiB free at 0, 12 MiB at 8 MiB
    steps.append(a.stats())
    a.free(y)
    steps.append(a.stats())
    row = [
        (s.allocated, s.reserved, s.segments, s.peak_allocated, s.largest_free, s.free_bytes)
        for s in steps
    ]
    assert row == [
        (3 * MiB, 20 * MiB, 1, 3 * MiB, 17 * MiB, 17 * MiB),
        (8 * MiB, 20 * MiB, 1, 8 * MiB, 12 * MiB, 12 * MiB),
        (5 * MiB, 20 * MiB, 1, 8 * MiB, 12 * MiB, 15 * MiB),
        (0, 20 * MiB, 1, 8 * MiB, 20 * MiB, 20 * MiB),
    ]
    assert [s.fragmentation for s in steps] == [0.0, 0.0, 1 - 12 / 15, 0.0]
    assert [s.live for s in steps] == [1, 2, 1, 0]


def test_the_slots_grow_as_blocks_multiply() -> None:
    a = CachingAllocator()
    handles = [a.malloc(512) for _ in range(1000)]
    assert a.state.blocks.shape[1] > 1000
    for h in handles[::2]:
        a.free(h)
    assert counts(a) == (500 * 512, 2 * MiB, 1)
    assert a.stats().largest_free == 2 * MiB - 1000 * 512


@pytest.mark.parametrize("bad", [-1, 2**62, 1.5, True, "1"])
def test_a_request_that_is_not_a_number_of_bytes_is_a_user_error(bad: object) -> None:
    with pytest.raises(UserError):
        CachingAllocator().malloc(bad)
    with pytest.raises(UserError):
        CachingAllocator(capacity=bad)


# ---------------------------------------------------------------- against the plain reference
SIZES = [1, 512, 513, 4 * KiB, 1 * MiB - 512, 1 * MiB, 1 * MiB + 1, 2 * MiB, 9 * MiB, 10 * MiB]


def random_steps(rng: random.Random, n: int) -> list[tuple[str, int]]:
    """Mostly allocations of sizes at the rules' edges and in between, some frees."""
    steps, live = [], []
    for i in range(n):
        if live and rng.random() < 0.45:
            steps.append(("free", live.pop(rng.randrange(len(live)))))
        else:
            edge = rng.choice(SIZES) + rng.choice([0, 0, -1, 1, 512])
            size = edge if rng.random() < 0.5 else rng.randint(0, 24 * MiB)
            steps.append(("alloc", max(0, size)))
            live.append(i)
    return steps


def assert_same_as_naive(steps: list[tuple[str, int]], capacity: int | None) -> None:
    """Run both, comparing counters and layouts after every step, until the end or an OOM
    (after which the sequence may free what the failed step did not allocate)."""
    model, naive = CachingAllocator(capacity), NaiveAllocator(capacity)
    handles: dict[int, tuple[int, object]] = {}
    for i, (kind, arg) in enumerate(steps):
        failed = False
        if kind == "free":
            h, addr = handles.pop(arg)
            model.free(h)
            naive.free(addr)
        else:
            expected = naive.malloc(arg)
            try:
                handles[i] = (model.malloc(arg), expected)
            except OutOfMemory:
                failed = True
            assert failed == (expected == "oom"), f"step {i}"
        s = model.stats()
        got = (s.allocated, s.reserved, s.segments, s.peak_allocated, s.peak_reserved)
        want = (naive.allocated, naive.reserved, len(naive.segments), naive.peak_allocated)
        assert got == (*want, naive.peak_reserved), f"step {i}"
        assert s.largest_free == naive.largest_free, f"step {i}"
        assert model.segments() == naive.layout(), f"step {i}"
        if failed:
            return


@pytest.mark.parametrize("seed", range(40))
def test_random_sequences_match_the_plain_reference(seed: int) -> None:
    rng = random.Random(seed)
    capacity = None if seed % 2 else rng.choice([30, 60, 100]) * MiB
    assert_same_as_naive(random_steps(rng, 300), capacity)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 40), st.integers(0, 30 * MiB)), max_size=60),
    st.one_of(st.none(), st.integers(0, 64 * MiB)),
)
def test_any_sequence_matches_the_plain_reference(ops, capacity) -> None:
    steps, live = [], []
    for is_free, pick, size in ops:
        if is_free and live:
            steps.append(("free", live.pop(pick % len(live))))
        else:
            live.append(len(steps))
            steps.append(("alloc", size))
    assert_same_as_naive(steps, capacity)


# ---------------------------------------------------------------- sequences and traces
def test_replay_gives_the_trajectory_the_peak_and_the_failure() -> None:
    sequence = AllocationSequence.of(
        [("alloc", 3 * MiB), ("alloc", 5 * MiB), ("free", 0), ("alloc", 13 * MiB)]
    )
    run = replay(sequence)
    assert run.trajectory.tolist() == [
        [3 * MiB, 8 * MiB, 5 * MiB, 19 * MiB],  # 13 MiB: a new 14 MiB segment, charged whole
        [20 * MiB, 20 * MiB, 20 * MiB, 34 * MiB],
        [1, 1, 1, 2],
    ]
    assert (run.peak_step, run.at_peak.allocated, run.at_peak.reserved) == (3, 19 * MiB, 34 * MiB)
    assert run.failed_step is None and run.final == run.at_peak
    tight = replay(sequence, capacity=30 * MiB)  # the 14 MiB segment does not fit
    assert (tight.failed_step, tight.failed_bytes) == (3, 13 * MiB)
    assert tight.trajectory.shape == (3, 4) and tight.peak_step == 1
    assert (tight.final.ooms, tight.final.retries, tight.at_peak.allocated) == (1, 1, 8 * MiB)


def test_replay_of_nothing() -> None:
    run = replay(AllocationSequence.of([]))
    assert run.trajectory.shape == (3, 0) and run.peak_step == -1
    assert run.at_peak.allocated == run.final.reserved == 0


@pytest.mark.parametrize(
    "steps", [[("free", 0)], [("alloc", 1), ("free", 1)], [("alloc", 1), ("free", 0), ("free", 0)]]
)
def test_a_sequence_freeing_what_it_did_not_allocate_is_a_user_error(steps) -> None:
    with pytest.raises(UserError, match="a free of a block allocated before"):
        replay(AllocationSequence.of(steps))


# w (1,000 bytes), a = f(w) (3 MiB), (b1, b2) = f(a) (600 bytes, 1 MiB), v a view of a, c = f(b1)
# of 0 bytes, d = f(w) (5 MiB); then a, v, b1, b2 and c are released. The allocator sees w, a,
# b1, b2 and d allocated in that order (neither the view nor c allocates), then a freed when
# v, its last name, goes, then b1 and b2. w, a constant, and d, still named, stay.
VIEW = [
    line(ARGS=["a"], INSTRUCTION="CALL", NAME="view", RESULT=["v"], TIME="1"),
    line(INSTRUCTION="MEMORY", MEMORY=str(3 * MiB), NAME="v"),
    line(ALIAS="0", INSTRUCTION="ALIAS", NAME="v"),
]
HAND = trace_text(
    constant("w", 1000),
    call("a", ["w"], 1, 3 * MiB),
    call(["b1", "b2"], ["a"], 1, 0)[:1],
    [
        line(INSTRUCTION="MEMORY", MEMORY="600", NAME="b1"),
        line(ALIAS="-1", INSTRUCTION="ALIAS", NAME="b1"),
    ],
    [
        line(INSTRUCTION="MEMORY", MEMORY=str(MiB), NAME="b2"),
        line(ALIAS="-1", INSTRUCTION="ALIAS", NAME="b2"),
    ],
    VIEW,
    call("c", ["b1"], 1, 0),
    call("d", ["w"], 1, 5 * MiB),
    release("a", "v", "b1", "b2", "c"),
)


def test_a_traces_sequence_is_its_eager_replays_allocations_and_frees() -> None:
    sequence = allocation_sequence(tiny_trace(HAND))
    steps = list(zip(sequence.kind.tolist(), sequence.arg.tolist(), strict=True))
    A, F = ALLOC_STEP, 1 - ALLOC_STEP
    assert steps == [
        (A, 1000),
        (A, 3 * MiB),
        (A, 600),
        (A, MiB),
        (A, 5 * MiB),
        (F, 1),
        (F, 2),
        (F, 3),
    ]
    assert sequence.storage.tolist() == [0, 1, 2, 3, 5, 1, 2, 3]


def test_a_rematerialized_operator_allocates_again_and_frees_the_sibling_still_held() -> None:
    # (a, b) = f(w); a is released, so freed; c = g(a) recomputes f: a is allocated anew, b,
    # still held, is computed again too and freed right after (simrd's duplicate); then c.
    text = trace_text(
        constant("w", 0),
        call(["a", "b"], ["w"], 1, 1000),
        release("a"),
        call("c", ["a"], 1, 3000),
        release("b", "c"),
    )
    sequence = allocation_sequence(tiny_trace(text))
    steps = list(zip(sequence.kind.tolist(), sequence.arg.tolist(), strict=True))
    A, F = ALLOC_STEP, 1 - ALLOC_STEP
    assert steps == [
        (A, 1000), (A, 1000), (F, 0), (A, 1000), (A, 1000), (F, 4), (A, 3000), (F, 1), (F, 6)
    ]  # fmt: skip
    assert replay(sequence).final.allocated == 1024  # a, recomputed, is never released


def test_a_traces_counters_at_its_peak() -> None:
    trace = tiny_trace(HAND)
    run = replay_trace(trace)
    # w: 1 KiB of a 2 MiB small segment; a: 3 MiB of a 20 MiB one; b1 (1 KiB) and b2 (1 MiB)
    # from the small segment's rest, d (5 MiB) from the large one's: 12 MiB stay free there.
    peak = run.at_peak
    assert run.peak_step == 4
    assert (peak.allocated, peak.reserved, peak.segments) == (9 * MiB + 2 * KiB, 22 * MiB, 2)
    assert (peak.largest_free, peak.free_bytes) == (12 * MiB, 13 * MiB - 2 * KiB)
    assert peak.fragmentation == 1 - (12 * MiB) / (13 * MiB - 2 * KiB)
    assert peak_memory(trace) == 9 * MiB + 1600  # simrd's, unrounded
    # b1 and b2, freed, join the small segment's free rest; a's 3 MiB stays apart from it.
    assert (run.final.allocated, run.final.largest_free) == (5 * MiB + KiB, 12 * MiB)


def test_resnet32_allocated_at_its_peak_is_simrds_peak_in_the_allocators_blocks(load_named):
    trace = load_named("resnet32")
    sequence = allocation_sequence(trace)
    run = replay(sequence)
    # The peak step's live storages, in the allocator's blocks and merely rounded.
    a, held = CachingAllocator(), {}
    for i in range(run.peak_step + 1):
        if sequence.kind[i] == ALLOC_STEP:
            held[i] = a.malloc(int(sequence.arg[i]))
        else:
            a.free(held.pop(int(sequence.arg[i])))
    raw = sum(int(sequence.arg[i]) for i in held)
    rounded = sum(round_size(int(sequence.arg[i])) for i in held)
    charged = sum(a.size(h) for h in held.values())
    assert raw == peak_memory(trace)  # the allocator's peak comes where simrd's does
    assert run.at_peak.allocated == charged == a.stats().allocated
    assert charged - rounded == 24 * MiB  # large blocks not split: up to 1 MiB each
    assert rounded - raw == 117_504
    assert run.at_peak.reserved == 10_125_049_856 and run.at_peak.segments == 96
    assert run.at_peak.free_bytes == 38_586_880 and run.at_peak.largest_free == 1_933_312
    stated = (raw, rounded - raw, charged - rounded, run.at_peak.free_bytes, 1_933_312)
    doc = DOC.read_text(encoding="utf-8")
    assert [f"{x:,}" for x in stated if f"{x:,}" not in doc] == []  # docs/runtime.md states them
    assert np.all(np.diff(run.trajectory[1]) >= 0)  # unlimited: nothing is ever released
