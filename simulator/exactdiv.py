"""Integer true division rounded exactly as CPython's `int / int` does, in compiled code.

CPython divides two ints as exact rationals and rounds once (round-half-even). A compiled
`float(a) / float(b)` rounds `b` first when it exceeds 2**53 and can then differ in the last
bit, which flips ties between eviction scores. The denominators here are products
size × staleness, which can exceed 2**63, so they are carried as 128-bit (hi, lo) pairs.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U32 = np.uint64(32)
_U64 = np.uint64(64)
_LOW32 = np.uint64(0xFFFFFFFF)
_FAST_LIMIT = 2.0**52  # products below this are exact in int64 and in float64
_INT64_MAX = 2**63 - 1


@njit(cache=True, inline="always")
def _bitlen64(x: np.uint64) -> int:
    n = 0
    while x:
        x >>= _U1
        n += 1
    return n


@njit(cache=True, inline="always")
def _bitlen128(hi: np.uint64, lo: np.uint64) -> int:
    return 64 + _bitlen64(hi) if hi else _bitlen64(lo)


@njit(cache=True, inline="always")
def _shl(hi: np.uint64, lo: np.uint64, n: int) -> tuple[np.uint64, np.uint64]:
    if n == 0:
        return hi, lo
    if n >= 64:
        return lo << np.uint64(n - 64), _U0
    s = np.uint64(n)
    return (hi << s) | (lo >> (_U64 - s)), lo << s


@njit(cache=True, inline="always")
def _mul128(x: np.uint64, y: np.uint64) -> tuple[np.uint64, np.uint64]:
    x0, x1, y0, y1 = x & _LOW32, x >> _U32, y & _LOW32, y >> _U32
    p00, p01, p10, p11 = x0 * y0, x0 * y1, x1 * y0, x1 * y1
    mid = (p00 >> _U32) + (p01 & _LOW32) + (p10 & _LOW32)
    lo = (p00 & _LOW32) | (mid << _U32)
    hi = p11 + (p01 >> _U32) + (p10 >> _U32) + (mid >> _U32)
    return hi, lo


@njit(cache=True)
def _divide128(a: np.uint64, bhi: np.uint64, blo: np.uint64) -> float:
    """Correctly rounded a / (bhi·2^64 + blo) for 0 < a < 2^63 and 0 < b < 2^126."""
    la, lb = _bitlen64(a), _bitlen128(bhi, blo)
    rhi, rlo = _shl(_U0, a, max(0, lb - la))
    dhi, dlo = _shl(bhi, blo, max(0, la - lb))
    e = lb - la
    if rhi < dhi or (rhi == dhi and rlo < dlo):
        rhi, rlo = _shl(rhi, rlo, 1)
        e += 1
    q = _U0  # 55 quotient bits of r/d, which now lies in [1, 2)
    for _ in range(55):
        q <<= _U1
        if rhi > dhi or (rhi == dhi and rlo >= dlo):
            borrow = _U1 if rlo < dlo else _U0
            rlo -= dlo
            rhi = rhi - dhi - borrow
            q |= _U1
        rhi, rlo = _shl(rhi, rlo, 1)
    mantissa = q >> _U2
    guard = (q >> _U1) & _U1
    rest = (q & _U1) | (_U1 if (rhi | rlo) else _U0)
    if guard and (rest or (mantissa & _U1)):
        mantissa += _U1
    return math.ldexp(float(mantissa), -52 - e)


@njit(cache=True)
def divide(a: int, b: int) -> float:
    """`a / b` as CPython computes it, for 0 <= a < 2^63 and 0 < b < 2^63."""
    if a < 2**53 and b < 2**53:
        return float(a) / float(b)
    if a == 0:
        return 0.0
    return _divide128(np.uint64(a), _U0, np.uint64(b))


@njit(cache=True)
def divide_product(a: int, x: int, y: int) -> float:
    """`a / (x * y)` as CPython computes it, for 0 <= a < 2^63 and 0 < x, y < 2^63."""
    if float(x) * float(y) < _FAST_LIMIT:
        return divide(a, x * y)
    if a == 0:
        return 0.0
    hi, lo = _mul128(np.uint64(x), np.uint64(y))
    return _divide128(np.uint64(a), hi, lo)


# ---------------------------------------------------------------- Python's operators in policies


def true_divide(a, b):
    """`a / b` with Python's semantics: a correctly rounded quotient of two integers."""
    return a / b


def true_divide_product(a, x, y):
    """`a / (x * y)` with Python's semantics, the product of two integers taken exactly."""
    return a / (x * y)


def checked_multiply(a, b):
    """`a * b`, an OverflowError where a product of integers leaves 64 bits."""
    return a * b


def _integers(*args) -> bool:
    return all(isinstance(a, types.Integer | types.Boolean) for a in args)


@njit(cache=True, inline="always")
def _signed(negative: bool, quotient: float) -> float:
    return -quotient if negative else quotient


@overload(true_divide, inline="always")
def _true_divide(a, b):
    if not _integers(a, b):
        return lambda a, b: a / b

    def exact(a, b):
        if 0 <= a < 2**53 and 0 < b < 2**53:  # both exact as floats: one rounding
            return float(a) / float(b)
        if a >= 0 and b > 0:
            return divide(a, b)
        if b == 0:
            raise ZeroDivisionError("division by zero")
        return _signed((a < 0) != (b < 0), divide(abs(a), abs(b)))

    return exact


@overload(true_divide_product, inline="always")
def _true_divide_product(a, x, y):
    if not _integers(a, x, y):
        return lambda a, x, y: a / (x * y)

    def exact(a, x, y):
        if 0 <= a < 2**53 and x > 0 and y > 0 and float(x) * float(y) < _FAST_LIMIT:
            return float(a) / float(x * y)  # as `divide_product` does, without a call
        if a >= 0 and x > 0 and y > 0:
            return divide_product(a, x, y)
        if x == 0 or y == 0:
            raise ZeroDivisionError("division by zero")
        return _signed((a < 0) != ((x < 0) != (y < 0)), divide_product(abs(a), abs(x), abs(y)))

    return exact


@overload(checked_multiply, inline="always")
def _checked_multiply(a, b):
    if not _integers(a, b):
        return lambda a, b: a * b

    def checked(a, b):
        # Tested before multiplying: LLVM may assume a signed product does not overflow.
        if a != 0 and b != 0 and abs(a) > _INT64_MAX // abs(b):
            raise OverflowError("integer product beyond 64 bits")
        return a * b

    return checked
