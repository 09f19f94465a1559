"""A model of the CUDA caching allocator of DTR's PyTorch (1.7.0a0): one device, one stream.

The rules are those of `c10/cuda/CUDACachingAllocator.cpp` at PyTorch commit d15b9d98 (the
base of DTR's prototype), cited below as `alloc:<line>`; docs/runtime.md states them. The
model is compiled: its state is four arrays (`AllocatorState`) and `malloc` / `free` are
`@njit` functions, so a compiled replay can call them per allocation. `CachingAllocator`
wraps them for tests and tools; `replay` and `replay_trace` run a whole allocation sequence.

Addresses are synthetic: each new segment starts where the last one ended, so of two free
blocks of one size the older segment's wins a tie, as a lower device address would.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from numba import njit

from simulator.api import simulate_events
from simulator.errors import UserError
from simulator.events import COLUMNS, KINDS
from simulator.layout import T_STORAGE, build_layout
from simulator.trace import Trace

# The allocator's constants, alloc:60-65.
kMinBlockSize = 512  # every size is rounded up to a multiple of this, and at least this
kSmallSize = 1 << 20  # the largest request served from the small pool (1 MiB)
kSmallBuffer = 2 << 20  # the segment a small request allocates on a miss (2 MiB)
kLargeBuffer = 20 << 20  # the segment a request below kMinLargeAlloc allocates (20 MiB)
kMinLargeAlloc = 10 << 20  # from this size on a segment is the request rounded to kRoundLarge
kRoundLarge = 2 << 20  # the rounding of such segments (2 MiB)

SMALL, LARGE = 0, 1  # the pools
NO_BLOCK = -1  # what malloc returns for 0 bytes, and what free ignores
OUT_OF_MEMORY = -2  # what malloc returns when the segment it needs does not fit the capacity

# Scalars in g
ALLOCATED, RESERVED, SEGMENTS, PEAK_ALLOCATED, PEAK_RESERVED, LIVE = range(6)
N_FREE = 6  # g[N_FREE + pool]: free blocks in the pool
NEXT_ADDR, CAPACITY, N_SPARE = 8, 9, 10  # CAPACITY -1: unlimited
SEGMENT_ALLOCS, SEGMENT_FREES, RETRIES, OOMS = 11, 12, 13, 14
N_SCALARS = 15
# Rows of `blocks`, one column per block slot
SIZE, ADDR, PREV, NEXT, STATE, POOL = range(6)
UNUSED, FREE, IN_USE = -1, 0, 1  # values of blocks[STATE]

AllocatorState = namedtuple("AllocatorState", ["g", "blocks", "free", "spare"])
"""g: int64 scalars above; blocks: int64[6, slots], the rows above (PREV / NEXT: the
neighbouring blocks of the same segment, -1 at its ends); free: int64[2 pools, 3, slots],
each pool's free blocks as (size, address, block) columns sorted by (size, address), the
order of the pool's std::set (alloc:130-139); spare: int64[slots], unused slots
spare[:g[N_SPARE]]."""


def new_state(capacity: int | None = None, slots: int = 64) -> AllocatorState:
    """An empty allocator; `capacity`: the bytes its segments may reserve in all (None: any)."""
    g = np.zeros(N_SCALARS, dtype=np.int64)
    g[CAPACITY] = -1 if capacity is None else capacity
    blocks = np.zeros((6, slots), dtype=np.int64)
    blocks[STATE] = UNUSED
    g[N_SPARE] = slots
    spare = np.arange(slots - 1, -1, -1, dtype=np.int64)
    return AllocatorState(g, blocks, np.zeros((2, 3, slots), dtype=np.int64), spare)


@njit(cache=True)
def round_size(nbytes: int) -> int:
    """alloc:481-487."""
    if nbytes < kMinBlockSize:
        return kMinBlockSize
    return kMinBlockSize * ((nbytes + kMinBlockSize - 1) // kMinBlockSize)


@njit(cache=True)
def segment_size(rounded: int) -> int:
    """The segment a miss allocates for a rounded request, alloc:597-605."""
    if rounded <= kSmallSize:
        return kSmallBuffer
    if rounded < kMinLargeAlloc:
        return kLargeBuffer
    return kRoundLarge * ((rounded + kRoundLarge - 1) // kRoundLarge)


@njit(cache=True)
def _position(entries: np.ndarray, n: int, size: int, addr: int) -> int:
    """The first of the n sorted entries not below (size, addr): std::set::lower_bound."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if entries[0, mid] < size or (entries[0, mid] == size and entries[1, mid] < addr):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _cache(st: AllocatorState, b: int) -> None:
    """Put free block b into its pool."""
    g, blocks = st.g, st.blocks
    pool = blocks[POOL, b]
    entries, n = st.free[pool], g[N_FREE + pool]
    i = _position(entries, n, blocks[SIZE, b], blocks[ADDR, b])
    for row in range(3):
        for j in range(n, i, -1):
            entries[row, j] = entries[row, j - 1]
    entries[0, i], entries[1, i], entries[2, i] = blocks[SIZE, b], blocks[ADDR, b], b
    g[N_FREE + pool] = n + 1
    blocks[STATE, b] = FREE


@njit(cache=True)
def _uncache(st: AllocatorState, b: int) -> None:
    """Take block b out of its pool."""
    g, blocks = st.g, st.blocks
    pool = blocks[POOL, b]
    entries, n = st.free[pool], g[N_FREE + pool]
    i = _position(entries, n, blocks[SIZE, b], blocks[ADDR, b])
    for row in range(3):
        for j in range(i, n - 1):
            entries[row, j] = entries[row, j + 1]
    g[N_FREE + pool] = n - 1


@njit(cache=True)
def _new_block(st: AllocatorState, size: int, addr: int, pool: int) -> int:
    g, blocks = st.g, st.blocks
    g[N_SPARE] -= 1
    b = st.spare[g[N_SPARE]]
    blocks[SIZE, b], blocks[ADDR, b], blocks[POOL, b] = size, addr, pool
    blocks[PREV, b] = blocks[NEXT, b] = -1
    blocks[STATE, b] = FREE
    return b


@njit(cache=True)
def _drop_block(st: AllocatorState, b: int) -> None:
    st.blocks[STATE, b] = UNUSED
    st.spare[st.g[N_SPARE]] = b
    st.g[N_SPARE] += 1


@njit(cache=True)
def _with_room(st: AllocatorState) -> AllocatorState:
    """st, or a copy with twice the slots when fewer than the two a malloc may take are spare."""
    if st.g[N_SPARE] >= 2:
        return st
    slots = st.blocks.shape[1]
    blocks = np.full((6, 2 * slots), UNUSED, dtype=np.int64)
    blocks[:, :slots] = st.blocks
    entries = np.zeros((2, 3, 2 * slots), dtype=np.int64)
    entries[:, :, :slots] = st.free
    spare = np.zeros(2 * slots, dtype=np.int64)
    n = st.g[N_SPARE]
    spare[:n] = st.spare[:n]
    for k in range(slots):
        spare[n + k] = 2 * slots - 1 - k
    st.g[N_SPARE] = n + slots
    return AllocatorState(st.g, blocks, entries, spare)


@njit(cache=True)
def _best_fit(st: AllocatorState, pool: int, size: int) -> int:
    """The pool's smallest free block of at least `size` bytes, lowest address on ties, taken
    out of the pool; -1 if none (alloc:607-615)."""
    entries, n = st.free[pool], st.g[N_FREE + pool]
    i = _position(entries, n, size, -1)
    if i == n:
        return -1
    b = entries[2, i]
    _uncache(st, b)
    return b


@njit(cache=True)
def _new_segment(st: AllocatorState, size: int, pool: int) -> int:
    """cudaMalloc of a segment (alloc:626-646): a new block spanning it, or -1 when it would
    take the reserved bytes past the capacity."""
    g = st.g
    if g[CAPACITY] >= 0 and g[RESERVED] + size > g[CAPACITY]:
        return -1
    b = _new_block(st, size, g[NEXT_ADDR], pool)
    g[NEXT_ADDR] += size
    g[RESERVED] += size
    g[PEAK_RESERVED] = max(g[PEAK_RESERVED], g[RESERVED])
    g[SEGMENTS] += 1
    g[SEGMENT_ALLOCS] += 1
    return b


@njit(cache=True)
def release_cached(st: AllocatorState) -> None:
    """free_cached_blocks (alloc:648-683), also emptyCache: every cached segment that is one
    free block, in both pools, is given back to the device."""
    g, blocks = st.g, st.blocks
    for pool in (LARGE, SMALL):
        entries, n, kept = st.free[pool], g[N_FREE + pool], 0
        for i in range(n):
            b = entries[2, i]
            if blocks[PREV, b] < 0 and blocks[NEXT, b] < 0:
                g[RESERVED] -= blocks[SIZE, b]
                g[SEGMENTS] -= 1
                g[SEGMENT_FREES] += 1
                _drop_block(st, b)
            else:
                for row in range(3):
                    entries[row, kept] = entries[row, i]
                kept += 1
        g[N_FREE + pool] = kept


@njit(cache=True)
def _split(st: AllocatorState, b: int, size: int) -> None:
    """Keep the first `size` bytes of free block b; the rest, at the higher addresses, stays
    free in the same pool (alloc:283-296) when the pool's rule allows (alloc:586-595)."""
    blocks = st.blocks
    rest = blocks[SIZE, b] - size
    small = blocks[POOL, b] == SMALL
    if not ((small and rest >= kMinBlockSize) or (not small and rest > kSmallSize)):
        return
    r = _new_block(st, rest, blocks[ADDR, b] + size, blocks[POOL, b])
    blocks[PREV, r], blocks[NEXT, r] = b, blocks[NEXT, b]
    if blocks[NEXT, b] >= 0:
        blocks[PREV, blocks[NEXT, b]] = r
    blocks[NEXT, b], blocks[SIZE, b] = r, size
    _cache(st, r)


@njit(cache=True)
def malloc(st: AllocatorState, nbytes: int) -> tuple[int, AllocatorState]:
    """Allocate `nbytes` (alloc:214-325): (the block, the state, a larger copy when it needed
    more slots). NO_BLOCK for 0 bytes (alloc:907); OUT_OF_MEMORY when the segment a miss needs
    does not fit the capacity even after the cached segments are released (alloc:228-236)."""
    if nbytes == 0:
        return NO_BLOCK, st
    st = _with_room(st)
    g = st.g
    size = round_size(nbytes)
    pool = SMALL if size <= kSmallSize else LARGE
    b = _best_fit(st, pool, size)
    if b < 0:
        b = _new_segment(st, segment_size(size), pool)
    if b < 0:
        release_cached(st)
        g[RETRIES] += 1
        b = _new_segment(st, segment_size(size), pool)
    if b < 0:
        g[OOMS] += 1
        return OUT_OF_MEMORY, st
    _split(st, b, size)
    st.blocks[STATE, b] = IN_USE
    g[ALLOCATED] += st.blocks[SIZE, b]
    g[PEAK_ALLOCATED] = max(g[PEAK_ALLOCATED], g[ALLOCATED])
    g[LIVE] += 1
    return b, st


@njit(cache=True)
def _absorb(st: AllocatorState, b: int, other: int) -> None:
    """Merge free block `other`, b's neighbour in its segment, into b (alloc:539-566)."""
    blocks = st.blocks
    if other < 0 or blocks[STATE, other] != FREE:
        return
    _uncache(st, other)
    if blocks[PREV, b] == other:
        blocks[ADDR, b] = blocks[ADDR, other]
        blocks[PREV, b] = blocks[PREV, other]
        if blocks[PREV, b] >= 0:
            blocks[NEXT, blocks[PREV, b]] = b
    else:
        blocks[NEXT, b] = blocks[NEXT, other]
        if blocks[NEXT, b] >= 0:
            blocks[PREV, blocks[NEXT, b]] = b
    blocks[SIZE, b] += blocks[SIZE, other]
    _drop_block(st, other)


@njit(cache=True)
def free(st: AllocatorState, b: int) -> None:
    """Free block b (alloc:327-347, 502-536): its bytes leave `allocated` at once and it joins
    its free neighbours in the same segment; NO_BLOCK is ignored."""
    if b < 0:
        return
    blocks, g = st.blocks, st.g
    g[ALLOCATED] -= blocks[SIZE, b]
    g[LIVE] -= 1
    blocks[STATE, b] = FREE
    _absorb(st, b, blocks[PREV, b])
    _absorb(st, b, blocks[NEXT, b])
    _cache(st, b)


@njit(cache=True)
def largest_free(st: AllocatorState) -> int:
    """The largest cached free block of either pool (0 if none)."""
    largest = 0
    for pool in (SMALL, LARGE):
        n = st.g[N_FREE + pool]
        if n:
            largest = max(largest, st.free[pool, 0, n - 1])
    return largest


@dataclass(frozen=True)
class Counters:
    """The allocator's counters at one moment. `allocated`: bytes of blocks in use, after
    rounding and splitting (PyTorch's allocated_bytes, what DTR's runtime compares with its
    budget); `reserved`: bytes of the segments held (reserved_bytes); `segments`: how many.
    """

    allocated: int
    reserved: int
    segments: int
    peak_allocated: int
    peak_reserved: int
    largest_free: int  # the largest free block inside the segments, either pool
    live: int  # blocks in use
    segment_allocs: int  # segments ever allocated (successful cudaMalloc calls)
    segment_frees: int  # segments given back (cudaFree calls)
    retries: int  # misses retried after releasing the cached segments
    ooms: int  # allocations that failed

    @property
    def free_bytes(self) -> int:
        """Bytes reserved but not allocated: the free blocks inside the segments."""
        return self.reserved - self.allocated

    @property
    def fragmentation(self) -> float:
        """External fragmentation of the cache: 1 - largest free block / free bytes, the share
        of the free bytes that a single request cannot use at once; 0 with no free bytes."""
        free_bytes = self.free_bytes
        return 1.0 - self.largest_free / free_bytes if free_bytes else 0.0


def counters(st: AllocatorState) -> Counters:
    g = [int(x) for x in st.g]
    return Counters(
        allocated=g[ALLOCATED],
        reserved=g[RESERVED],
        segments=g[SEGMENTS],
        peak_allocated=g[PEAK_ALLOCATED],
        peak_reserved=g[PEAK_RESERVED],
        largest_free=int(largest_free(st)),
        live=g[LIVE],
        segment_allocs=g[SEGMENT_ALLOCS],
        segment_frees=g[SEGMENT_FREES],
        retries=g[RETRIES],
        ooms=g[OOMS],
    )


class OutOfMemory(Exception):
    """The allocator could not reserve the segment a request needed within its capacity."""

    def __init__(self, nbytes: int, stats: Counters):
        self.nbytes, self.stats = nbytes, stats
        segment = segment_size(round_size(nbytes))
        super().__init__(
            f"out of memory: tried to allocate {nbytes} bytes (a {segment}-byte segment) with "
            f"{stats.allocated} allocated and {stats.reserved} reserved"
        )


def _bytes(x: object, what: str) -> int:
    if not isinstance(x, int | np.integer) or isinstance(x, bool) or not 0 <= x < 2**62:
        raise UserError(what, "an integer number of bytes from 0 to 2**62 - 1", repr(x))
    return int(x)


class CachingAllocator:
    """The compiled model behind Python calls: `malloc` returns a handle, `free` takes it."""

    def __init__(self, capacity: int | None = None):
        self.state = new_state()
        self.set_capacity(capacity)

    def set_capacity(self, capacity: int | None) -> None:
        """Bytes the segments may reserve from now on (None: any); what is reserved stays."""
        self.state.g[CAPACITY] = -1 if capacity is None else _bytes(capacity, "capacity")

    def malloc(self, nbytes: int) -> int:
        """A handle to a block of at least `nbytes`; NO_BLOCK for 0 bytes. OutOfMemory when
        the segment it needs does not fit the capacity (the cache is released first)."""
        block, self.state = malloc(self.state, _bytes(nbytes, "request"))
        if block == OUT_OF_MEMORY:
            raise OutOfMemory(nbytes, self.stats())
        return int(block)

    def free(self, handle: int) -> None:
        if handle != NO_BLOCK and self.state.blocks[STATE, handle] != IN_USE:
            raise ValueError(f"block {handle} is not in use")
        free(self.state, handle)

    def empty_cache(self) -> None:
        release_cached(self.state)

    def size(self, handle: int) -> int:
        """The bytes a block in use is charged (its size after rounding and splitting)."""
        return int(self.state.blocks[SIZE, handle])

    def stats(self) -> Counters:
        return counters(self.state)

    def segments(self) -> list[list[tuple[int, int, bool]]]:
        """Each segment, by address, as its blocks (address, size, in use) in address order."""
        blocks = self.state.blocks
        heads = [b for b in range(blocks.shape[1]) if blocks[STATE, b] != UNUSED]
        layout = []
        for b in sorted((b for b in heads if blocks[PREV, b] < 0), key=lambda b: blocks[ADDR, b]):
            segment = []
            while b >= 0:
                segment.append((int(blocks[ADDR, b]), int(blocks[SIZE, b]), bool(blocks[STATE, b])))
                b = blocks[NEXT, b]
            layout.append(segment)
        return layout


# ---------------------------------------------------------------- sequences of allocations
ALLOC_STEP, FREE_STEP = 0, 1
_UNLIMITED = 2**62 - 1  # the largest budget `simulate` accepts: nothing is ever evicted


@dataclass(frozen=True, eq=False)
class AllocationSequence:
    """Allocations and frees in order: step i allocates `arg[i]` bytes (kind ALLOC_STEP) or
    frees the block that step `arg[i]` allocated (FREE_STEP). `storage[i]`: the trace's
    storage the step allocates or frees (the layout's index), -1 for a hand-made sequence."""

    kind: np.ndarray  # int8
    arg: np.ndarray  # int64
    storage: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def allocations(self) -> int:
        return int(np.count_nonzero(self.kind == ALLOC_STEP))

    @classmethod
    def of(cls, steps: list[tuple[str, int]]) -> AllocationSequence:
        """From ("alloc", bytes) and ("free", the step that allocated the block) pairs."""
        kinds = {"alloc": ALLOC_STEP, "free": FREE_STEP}
        kind = np.array([kinds[k] for k, _ in steps], dtype=np.int8)
        arg = np.array([a for _, a in steps], dtype=np.int64)
        return cls(kind, arg, np.full(len(steps), -1, dtype=np.int64))

    def check(self) -> None:
        """UserError unless every free names an earlier allocation not freed before it."""
        live = set()
        for i, (kind, arg) in enumerate(zip(self.kind.tolist(), self.arg.tolist(), strict=True)):
            if kind == ALLOC_STEP:
                _bytes(arg, f"step {i}")
                live.add(i)
            elif arg not in live:
                raise UserError(f"step {i}", "a free of a block allocated before", f"{arg}")
            else:
                live.remove(arg)


def allocation_sequence(trace: Trace) -> AllocationSequence:
    """What the allocator sees when simrd's eager runtime replays `trace` with no budget: each
    operator's outputs with bytes (an alias lives in its input's storage) allocated when it
    runs, in output order, and each storage freed where the replay frees it (its last
    reference released; constants and the outputs still named at the end stay). The order is
    the simulator's own, read from its events; a storage computed while still held (a
    rematerialized sibling) is allocated and freed after its operator, as simrd counts it."""
    events = simulate_events(trace, _UNLIMITED)[1]
    storage_of = build_layout(trace).tens[T_STORAGE]
    where = events.where("alloc", "free")  # no budget: nothing is evicted
    kinds = events.values(where, "kind").astype(int)
    op_col, storage_col = 1 + COLUMNS["alloc"].index("op"), 1 + COLUMNS["free"].index("storage")
    steps: list[tuple[int, int, int]] = []
    held: dict[int, int] = {}  # storage -> the step that allocated it
    for row, kind in zip(events.rows[where].astype(np.int64), kinds, strict=True):
        if KINDS[kind] == "alloc":
            _allocate_outputs(trace, int(row[op_col]), storage_of, steps, held)
        elif int(row[storage_col]) in held:
            s = int(row[storage_col])
            steps.append((FREE_STEP, held.pop(s), s))
    kind, arg, storage = zip(*steps, strict=True) if steps else ((), (), ())
    return AllocationSequence(
        np.array(kind, dtype=np.int8), np.array(arg, dtype=np.int64), np.array(storage, np.int64)
    )


def _allocate_outputs(trace, op, storage_of, steps, held) -> None:
    duplicates = []
    for t in range(trace.op_out_ptr[op], trace.op_out_ptr[op + 1]):
        s, nbytes = int(storage_of[t]), int(trace.tensor_size[t])
        if trace.tensor_alias[t] >= 0 or nbytes == 0:
            continue
        if s in held:
            duplicates.append(len(steps))
        else:
            held[s] = len(steps)
        steps.append((ALLOC_STEP, nbytes, s))
    steps.extend((FREE_STEP, i, steps[i][2]) for i in duplicates)


@njit(cache=True)
def _run(st, kind, arg, stop, handles, trajectory):
    """Steps 0..stop - 1 from `st`: (the state, the failing step or -1); trajectory[:, i] the
    allocated and reserved bytes and the segments after step i."""
    for i in range(stop):
        if kind[i] == ALLOC_STEP:
            b, st = malloc(st, arg[i])
            handles[i] = b
        else:
            free(st, handles[arg[i]])
        trajectory[0, i] = st.g[ALLOCATED]
        trajectory[1, i] = st.g[RESERVED]
        trajectory[2, i] = st.g[SEGMENTS]
        if kind[i] == ALLOC_STEP and handles[i] == OUT_OF_MEMORY:
            return st, i
    return st, -1


@dataclass(frozen=True, eq=False)
class SequenceReplay:
    """A sequence run through the model. `trajectory`: int64[3, steps run], the allocated and
    reserved bytes and the segments after each step; `peak_step`: the first step after which
    the allocated bytes were at their highest, with the counters then (`at_peak`; those of the
    empty allocator for an empty sequence); `failed_step` and `failed_bytes`: the allocation
    that did not fit the capacity (the replay stops there), or None."""

    trajectory: np.ndarray
    peak_step: int
    at_peak: Counters
    final: Counters
    failed_step: int | None
    failed_bytes: int | None


def replay(sequence: AllocationSequence, capacity: int | None = None) -> SequenceReplay:
    """Run `sequence` through a new allocator of `capacity` bytes (None: unlimited)."""
    sequence.check()
    capacity = None if capacity is None else _bytes(capacity, "capacity")
    st, failed, trajectory = _replay_steps(sequence, capacity, len(sequence))
    steps = trajectory.shape[1]
    peak = int(np.argmax(trajectory[0])) if steps else -1
    at_peak = counters(_replay_steps(sequence, capacity, peak + 1)[0])
    return SequenceReplay(
        trajectory=trajectory,
        peak_step=peak,
        at_peak=at_peak,
        final=counters(st),
        failed_step=None if failed < 0 else failed,
        failed_bytes=None if failed < 0 else int(sequence.arg[failed]),
    )


def _replay_steps(sequence: AllocationSequence, capacity: int | None, stop: int):
    """The state after steps 0..stop - 1 (or the failing one), that step or -1, and the
    trajectory up to it."""
    handles = np.full(len(sequence), NO_BLOCK, dtype=np.int64)
    trajectory = np.zeros((3, stop), dtype=np.int64)
    slots = 2 * sequence.allocations + 2  # each malloc adds at most two blocks: never grows
    kind, arg = sequence.kind, sequence.arg
    st, failed = _run(new_state(capacity, slots), kind, arg, stop, handles, trajectory)
    return st, int(failed), trajectory[:, : stop if failed < 0 else failed + 1]


def replay_trace(trace: Trace, capacity: int | None = None) -> SequenceReplay:
    """`replay` of the allocations and frees of `trace` (`allocation_sequence`)."""
    return replay(allocation_sequence(trace), capacity)
