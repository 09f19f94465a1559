"""PyTorch 1.7's CUDA caching allocator written as plainly as possible, to cross-check the
compiled model (simulator/allocator.py): segments are lists of blocks in address order, a
search scans every block, and nothing is kept that can be recomputed."""

from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1 << 20


@dataclass
class Block:
    addr: int
    size: int
    used: bool = False


@dataclass
class Segment:
    small: bool
    blocks: list[Block] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(b.size for b in self.blocks)


class NaiveAllocator:
    """Handles are block addresses; malloc returns None for 0 bytes and "oom" on failure."""

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity
        self.segments: list[Segment] = []
        self.next_addr = 0
        self.peak_allocated = self.peak_reserved = 0

    @property
    def allocated(self) -> int:
        return sum(b.size for s in self.segments for b in s.blocks if b.used)

    @property
    def reserved(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def largest_free(self) -> int:
        return max((b.size for s in self.segments for b in s.blocks if not b.used), default=0)

    def layout(self) -> list[list[tuple[int, int, bool]]]:
        ordered = sorted(self.segments, key=lambda s: s.blocks[0].addr)
        return [[(b.addr, b.size, b.used) for b in s.blocks] for s in ordered]

    def malloc(self, nbytes: int) -> int | str | None:
        if nbytes == 0:
            return None
        size = max(512, -(-nbytes // 512) * 512)
        small = size <= MiB
        fitting = [
            (b.size, b.addr, s, b)
            for s in self.segments
            if s.small == small
            for b in s.blocks
            if not b.used and b.size >= size
        ]
        if fitting:
            _, _, segment, block = min(fitting, key=lambda f: (f[0], f[1]))
        else:
            found = self._new_segment(size, small)
            if found is None:
                return "oom"
            segment, block = found
        rest = block.size - size
        if (small and rest >= 512) or (not small and rest > MiB):
            i = segment.blocks.index(block)
            segment.blocks.insert(i + 1, Block(block.addr + size, rest))
            block.size = size
        block.used = True
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block.addr

    def _new_segment(self, size: int, small: bool) -> tuple[Segment, Block] | None:
        if size <= MiB:
            length = 2 * MiB
        elif size < 10 * MiB:
            length = 20 * MiB
        else:
            length = -(-size // (2 * MiB)) * 2 * MiB
        if not self._fits(length):
            self.empty_cache()
            if not self._fits(length):
                return None
        block = Block(self.next_addr, length)
        self.next_addr += length
        self.segments.append(Segment(small, [block]))
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return self.segments[-1], block

    def _fits(self, length: int) -> bool:
        return self.capacity is None or self.reserved + length <= self.capacity

    def free(self, addr: int | None) -> None:
        if addr is None:
            return
        for s in self.segments:
            for i, b in enumerate(s.blocks):
                if b.addr == addr and b.used:
                    b.used = False
                    self._merge(s, i)
                    return
        raise AssertionError(f"no block in use at {addr}")

    @staticmethod
    def _merge(s: Segment, i: int) -> None:
        if i + 1 < len(s.blocks) and not s.blocks[i + 1].used:
            s.blocks[i].size += s.blocks.pop(i + 1).size
        if i > 0 and not s.blocks[i - 1].used:
            s.blocks[i - 1].size += s.blocks.pop(i).size

    def empty_cache(self) -> None:
        self.segments = [s for s in self.segments if len(s.blocks) > 1 or s.blocks[0].used]
