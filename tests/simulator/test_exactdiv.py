"""simulator.exactdiv must round integer quotients exactly as CPython's `int / int` does."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.exactdiv import divide, divide_product

MAX = 2**63 - 1  # the largest operand the compiled functions accept
N_RANDOM = 20_000


def _same(x: float, y: float) -> bool:
    """Bit-for-bit equality (float.hex tells 0.0 from -0.0 and shows every mantissa bit)."""
    return x.hex() == y.hex()


def _operand(rng: random.Random, low: int = 1) -> int:
    """A mixture of the magnitudes the simulator meets, with their edges."""
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randint(low, 1000)
    if kind == 1:
        return rng.randint(low, 2**53 - 1)
    if kind == 2:
        return rng.randint(max(low, 2**53), MAX)
    if kind == 3:
        return 2 ** rng.randrange(63)
    if kind == 4:  # next to a power of two, where float(n) rounds
        return min(MAX, max(low, 2 ** rng.randrange(1, 64) + rng.randint(-3, 3)))
    return rng.randint(low, MAX)


def _random_pairs(seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(_operand(rng, low=0), _operand(rng)) for _ in range(N_RANDOM)]


def _random_triples(seed: int) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    return [(_operand(rng, low=0), _operand(rng), _operand(rng)) for _ in range(N_RANDOM)]


EDGES = [
    (MAX, 1),
    (MAX, MAX),
    (1, MAX),
    (MAX - 1, MAX),
    (2**53 + 1, 1),
    (2**53 + 1, 3),
    (2**53 - 1, 2**53 + 1),
    (2**62, 2**62 + 1),
    (1, 2**53 + 1),
]


def test_divide_matches_cpython_on_random_operands() -> None:
    wrong = [(a, b) for a, b in _random_pairs(2024) if not _same(divide(a, b), a / b)]
    assert not wrong, f"{len(wrong)} mismatches, e.g. {wrong[:3]}"


def test_divide_product_matches_cpython_on_random_operands() -> None:
    triples = _random_triples(4048)
    wrong = [t for t in triples if not _same(divide_product(*t), t[0] / (t[1] * t[2]))]
    assert not wrong, f"{len(wrong)} mismatches, e.g. {wrong[:3]}"


@pytest.mark.parametrize(("a", "b"), EDGES)
def test_divide_at_the_edges(a: int, b: int) -> None:
    assert _same(divide(a, b), a / b)


@pytest.mark.parametrize(
    ("a", "x", "y"),
    [
        (MAX, MAX, MAX),  # a 126-bit denominator
        (MAX, 1, 1),
        (2**53 + 1, 2**26, 2**26),  # product just at the fast path's limit
        (2**53 + 1, 2**26, 2**26 - 1),
        (2**53 + 1, 2**26 + 1, 2**26 + 1),
        (MAX, 2**32 + 1, 2**32 - 1),
        (3, 2**62, 2**62),
    ],
)
def test_divide_product_at_the_edges(a: int, x: int, y: int) -> None:
    assert _same(divide_product(a, x, y), a / (x * y))


def _midpoints() -> list[tuple[int, int]]:
    """Odd 54-bit numerators over powers of two: each quotient lies halfway between two floats."""
    rng = random.Random(7)
    numerators = [2**53 + 1, 2**53 + 3, 2**54 - 1, 2**54 - 3]
    numerators += [rng.randrange(2**53, 2**54) | 1 for _ in range(60)]
    return [(a, 2**k) for a in numerators for k in (0, 1, 9, 31, 53, 62)]


def _is_even_tie(quotient: float, a: int, b: int) -> bool:
    """`quotient` is one unit of the 54th bit from a / b and has an even 53-bit mantissa."""
    scaled = Fraction(quotient) * b  # an integer: quotient is a 53-bit float, b a power of two
    return abs(scaled - a) == 1 and (int(scaled) >> 1) % 2 == 0


def test_midpoints_round_half_to_even() -> None:
    cases = _midpoints()
    for a, b in cases:
        q = divide(a, b)
        assert _same(q, a / b), (a, b)
        assert _is_even_tie(q, a, b), (a, b)
    rounded_up = {divide(a, b) * b > a for a, b in cases}
    assert rounded_up == {True, False}  # ties go both ways, so not truncation nor rounding up


def test_product_midpoints_round_half_to_even() -> None:
    for a, b in _midpoints():
        k = b.bit_length() - 1
        x, y = 2 ** (k // 2), 2 ** (k - k // 2)
        assert _same(divide_product(a, x, y), a / (x * y)), (a, x, y)
        assert _is_even_tie(divide_product(a, x, y), a, b), (a, x, y)


def _first_double_rounding(seed: int) -> tuple[int, int]:
    """Operands where dividing the rounded floats gives another float than the exact quotient."""
    rng = random.Random(seed)
    while True:
        a, b = rng.randrange(2**53, 2**63), rng.randrange(2**53, 2**63)
        if float(a) / float(b) != a / b:
            return a, b


def _first_product_double_rounding(seed: int) -> tuple[int, int, int]:
    rng = random.Random(seed)
    while True:
        a, x, y = rng.randrange(2**53, 2**63), rng.randrange(2**20, 2**40), rng.randrange(2**20)
        if float(a) / (float(x) * float(y)) != a / (x * y):
            return a, x, y


def test_exact_where_float_division_is_off_by_one_bit() -> None:
    # Why the module exists: simrd divides Python ints, and a compiled float(a) / float(b) can
    # land one ulp away from that, which would break ties between eviction scores differently.
    a, b = _first_double_rounding(99)
    assert float(a) / float(b) != a / b
    assert _same(divide(a, b), a / b)


def test_product_exact_where_float_division_is_off_by_one_bit() -> None:
    a, x, y = _first_product_double_rounding(99)
    assert float(a) / (float(x) * float(y)) != a / (x * y)
    assert _same(divide_product(a, x, y), a / (x * y))


@pytest.mark.parametrize("b", [1, 3, 2**52, 2**53 + 1, MAX])
def test_zero_numerator_is_positive_zero(b: int) -> None:
    assert _same(divide(0, b), 0.0)
    assert _same(divide_product(0, b, b), 0.0)
    assert _same(divide_product(0, 1, b), 0.0)


@settings(derandomize=True, max_examples=3000, deadline=None)
@given(st.integers(0, MAX), st.integers(1, MAX))
def test_divide_property(a: int, b: int) -> None:
    assert _same(divide(a, b), a / b)


@settings(derandomize=True, max_examples=3000, deadline=None)
@given(st.integers(0, MAX), st.integers(1, MAX), st.integers(1, MAX))
def test_divide_product_property(a: int, x: int, y: int) -> None:
    assert _same(divide_product(a, x, y), a / (x * y))
