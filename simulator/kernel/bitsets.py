"""Rows of 64-bit words as sets of storages: membership, lowest bit, members."""

from __future__ import annotations

import numpy as np
from numba import njit

U1 = np.uint64(1)
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_SHIFT = np.uint64(58)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * int(_DEBRUIJN) % 2**64) >> 58] = _i


@njit(inline="always")
def low_bit(word: np.uint64) -> int:
    """Index of the lowest set bit (word != 0), by de Bruijn multiplication."""
    return _DEBRUIJN_INDEX[((word & (~word + U1)) * _DEBRUIJN) >> _DEBRUIJN_SHIFT]


@njit(inline="always")
def has_bit(bits: np.ndarray, plane: int, row: int, i: int) -> bool:
    return (bits[plane, row, i >> 6] >> np.uint64(i & 63)) & U1 != 0


@njit(inline="always")
def set_bit(bits: np.ndarray, plane: int, row: int, i: int) -> None:
    bits[plane, row, i >> 6] |= U1 << np.uint64(i & 63)


@njit(inline="always")
def clear_bit(bits: np.ndarray, plane: int, row: int, i: int) -> None:
    bits[plane, row, i >> 6] &= ~(U1 << np.uint64(i & 63))


@njit
def members(bits: np.ndarray, plane: int, row: int, out: np.ndarray) -> int:
    """Write the set bits of one row into `out`, ascending; return how many."""
    n = 0
    for w in range(bits.shape[2]):
        word = bits[plane, row, w]
        while word:
            out[n] = w * 64 + low_bit(word)
            n += 1
            word &= word - U1
    return n
