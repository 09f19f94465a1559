"""Policies written in files: decisions, the reference path, certification, errors, caching.

Every distinct score compiles the kernel's replay once (about 25 s), so this file compiles
four: the two of examples/policies.py, one reading every feature, one that raises.
"""

from __future__ import annotations

import hashlib
import math
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from numba import njit

from simulator import PolicyError, get_policy, peak_memory, reference, simulate
from simulator.exactdiv import checked_multiply, true_divide, true_divide_product
from simulator.scoring import FEATURES
from tests.support.tracegen import random_trace_text, tiny_trace

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "policies.py"
NBHD_AGAIN = f"{EXAMPLES}:nbhd_penalty_again"
STALE_SQUARED = f"{EXAMPLES}:stale_squared"
SEEDS = range(40)
FIELDS = (
    "outcome",
    "clock",
    "remat_compute",
    "peak_memory",
    "evictions",
    "heuristic_evals",
    "eager_frees",
    "eviction_seq_sha256",
    "budget_lo",
    "budget_hi",
)


def _budgets(trace) -> list[int]:
    peak = peak_memory(trace)
    return sorted({peak * k // 10 for k in (2, 4, 5, 6, 8, 10)})


def _fields(result) -> dict:
    return {f: getattr(result, f) for f in FIELDS}


def _file(tmp_path: Path, body: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    head = "import math\n\nfrom simulator import Param, policy\n\n\n"
    path.write_text(head + textwrap.dedent(body))
    return path


# ---------------------------------------------------------------- decisions


@pytest.mark.parametrize("b", [0.25, 0.5])
def test_nbhd_penalty_written_in_a_file_decides_as_the_builtin(b: float) -> None:
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, 60))
        for budget in _budgets(trace):
            mine = simulate(trace, budget, NBHD_AGAIN, params={"b": b})
            builtin = simulate(trace, budget, "nbhd-penalty", params={"b": b})
            assert _fields(mine) == _fields(builtin), (seed, budget)
            assert mine.policy == "my-nbhd-penalty" and mine.params == (("b", b),)


def test_a_file_policy_decides_in_the_kernel_as_in_the_reference_path() -> None:
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, 40))
        for budget in _budgets(trace):
            compiled = simulate(trace, budget, STALE_SQUARED)
            slow = reference.simulate_capped(trace, budget, STALE_SQUARED, None)
            for field in ("outcome", "clock", "evictions", "eviction_seq_sha256"):
                assert getattr(compiled, field) == slow[field], (seed, budget, field)


EVERY_FEATURE = """\
@policy("every-feature", {"w": 0.5})
def every_feature(c, w):
    \"\"\"reads every feature\"\"\"
    if c.size == 0 or c.staleness == 0:
        return math.inf
    local = c.compute + c.forward_compute + c.reverse_compute + c.class_estar
    spread = c.nbhd + w * c.times_evicted + c.centrality / 1000 + c.last_access % 7
    room = (c.memory + c.request - c.budget - c.shortfall) + 1
    return (c.estar + local) / (c.size * c.staleness) * (1 + spread) * room
"""


def test_every_feature_reads_in_the_kernel_as_in_the_reference_path(tmp_path: Path) -> None:
    spec = f"{_file(tmp_path, EVERY_FEATURE)}:every_feature"
    assert get_policy(spec).features == frozenset(FEATURES)
    evicted_again = 0
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, 40))
        for budget in _budgets(trace):
            compiled = simulate(trace, budget, spec)
            slow = reference.simulate_capped(trace, budget, spec, None)
            for field in ("outcome", "clock", "evictions", "eviction_seq_sha256"):
                assert getattr(compiled, field) == slow[field], (seed, budget, field)
            evicted_again += len(slow["evicted"]) - len(set(slow["evicted"]))
            # It reads the budget: a run whose policy decided certifies its own budget only.
            if compiled.evictions:
                assert (compiled.budget_lo, compiled.budget_hi) == (budget, budget)
    assert evicted_again > 0  # times_evicted was more than 0 somewhere


def test_a_score_of_budget_independent_features_keeps_the_certified_interval() -> None:
    widths = []
    for seed in SEEDS:
        trace = tiny_trace(random_trace_text(seed, 40))
        for budget in _budgets(trace):
            result = simulate(trace, budget, STALE_SQUARED)
            if result.evictions:  # (else nothing read the budget: no upper end)
                widths.append(result.budget_hi - result.budget_lo)
    assert max(widths) > 0


# ---------------------------------------------------------------- Python's arithmetic


@njit
def _divide(a, b):
    return true_divide(a, b)


@njit
def _divide_product(a, x, y):
    return true_divide_product(a, x, y)


@njit
def _multiply(a, b):
    return checked_multiply(a, b)


def test_integer_division_in_a_score_is_pythons() -> None:
    rng = random.Random(5)
    for _ in range(3000):
        a = rng.randrange(-(2**62), 2**62)
        x, y = rng.randrange(1, 2**40), rng.randrange(1, 2**40)
        x, y = x * rng.choice((1, -1)), y * rng.choice((1, -1))
        assert _divide(a, x) == a / x, (a, x)
        assert _divide_product(a, x, y) == a / (x * y), (a, x, y)  # x * y beyond 64 bits
    assert _divide(1.5, 4) == 1.5 / 4 and _divide_product(3, 2.0, 4) == 3 / 8.0
    with pytest.raises(ZeroDivisionError):
        _divide(1, 0)
    with pytest.raises(ZeroDivisionError):
        _divide_product(1, 5, 0)


def test_an_integer_product_beyond_64_bits_raises() -> None:
    assert _multiply(2**31, 2**31) == 2**62 and _multiply(-(2**31), 3) == -3 * 2**31
    with pytest.raises(OverflowError):
        _multiply(2**32, 2**31)
    assert _multiply(2.0**40, 2**40) == 2.0**80


# ---------------------------------------------------------------- errors


def _refused(tmp_path: Path, body: str, attribute: str = "mine") -> str:
    path = _file(tmp_path, body)
    with pytest.raises(PolicyError) as info:
        get_policy(f"{path}:{attribute}")
    return str(info.value)


@pytest.mark.parametrize(
    ("body", "line", "expected"),
    [
        (
            '@policy("m")\ndef mine(c):\n    """doc"""\n    return c.bogus\n',
            9,
            "expected a feature among compute, size,",
        ),
        (
            '@policy("m")\ndef mine(c):\n    """doc"""\n    return max(c)\n',
            9,
            "expected the candidate read only as c.<feature>, found c itself",
        ),
        (
            '@policy("m")\ndef mine(c):\n    """doc"""\n    return "big"\n',
            7,
            "expected a score that is a number, found str",
        ),
        (
            '@policy("m")\ndef mine(c):\n    """doc"""\n    x = c.size - 1\n    return 1 / x\n',
            10,
            "expected a score that does not raise (every feature = 1), found ZeroDivisionError",
        ),
        ('@policy("m")\ndef mine(c):\n    return (\n', 8, "expected Python that compiles"),
        ("raise RuntimeError('no')\n", 6, "expected a module that imports, found RuntimeError"),
        (
            '@policy("m", {"b": 1})\ndef mine(c):\n    """doc"""\n    return 1\n',
            7,
            "expected parameters c, b, found c",
        ),
        (
            'WHAT = "x"\n\n\n@policy("m")\ndef mine(c):\n    """doc"""\n    return WHAT\n',
            12,
            "expected a number, the math module or a function of it, found WHAT = str",
        ),
        ('@policy("dtr")\ndef mine(c):\n    """doc"""\n    return 1\n', 7, "no built-in"),
        ('@policy("m")\ndef mine(c):\n    return 1\n', 7, "expected a summary= or a docstring"),
    ],
)
def test_a_bad_policy_file_is_one_line_naming_its_file_and_line(
    tmp_path: Path, body: str, line: int, expected: str
) -> None:
    message = _refused(tmp_path, body)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'mine.py'}:{line}: "), message
    assert expected in message, message


def test_a_file_without_the_policy_names_those_it_has(tmp_path: Path) -> None:
    message = _refused(tmp_path, '@policy("m")\ndef mine(c):\n    """d"""\n    return 1\n', "x")
    assert message == (
        f"{tmp_path / 'mine.py'}: expected a function decorated with @policy, one of: mine,"
        " found 'x'"
    )
    with pytest.raises(PolicyError, match="no file"):
        get_policy(f"{tmp_path / 'absent.py'}:mine")


RAISING = """\
@policy("raising")
def raising(c):
    \"\"\"e* / staleness without the guard: a staleness of 0 raises, as in Python\"\"\"
    return c.estar / c.staleness
"""


def test_a_score_that_raises_in_the_kernel_is_one_line_and_nothing_is_returned(
    tmp_path: Path,
) -> None:
    spec = f"{_file(tmp_path, RAISING)}:raising"
    trace = tiny_trace(random_trace_text(3, 40))
    with pytest.raises(PolicyError) as info:
        for budget in _budgets(trace):
            simulate(trace, budget, spec)
    assert str(info.value) == (
        f"{tmp_path / 'mine.py'}:7: expected a score that does not raise, found"
        " ZeroDivisionError: division by zero"
    )


def test_a_score_numba_cannot_compile_is_one_line(tmp_path: Path) -> None:
    body = """\
    @policy("untyped")
    def mine(c):
        \"\"\"a method numba does not have\"\"\"
        return float(int.bit_length(c.size))
    """
    spec = f"{_file(tmp_path, body)}:mine"
    with pytest.raises(PolicyError) as info:
        simulate(tiny_trace(random_trace_text(3, 10)), 10, spec)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'mine.py'}:7: expected a score the kernel compiles")
    assert "\n" not in message


# ---------------------------------------------------------------- caching


def test_a_fresh_process_loads_a_file_policy_from_the_cache() -> None:
    script = (
        "from simulator import kernel, simulate\n"
        "from tests.support.tracegen import random_trace_text, tiny_trace\n"
        f"simulate(tiny_trace(random_trace_text(1, 20)), 100, {STALE_SQUARED!r})\n"
        "print(sum(kernel.replay.stats.cache_misses.values()))\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
        )
        for _ in range(2)
    ]
    assert runs[1].stdout.strip() == "0", runs[1].stderr


def test_a_file_policy_names_its_source_and_sha256_and_scores_in_python() -> None:
    mine = get_policy(STALE_SQUARED)
    assert (mine.name, mine.source) == ("stale-squared", STALE_SQUARED)
    assert mine.source_sha256 == hashlib.sha256(EXAMPLES.read_bytes()).hexdigest()
    assert mine(SimpleNamespace(estar=8, size=2, staleness=2)) == 1.0
    assert mine(SimpleNamespace(estar=8, size=2, staleness=0)) == math.inf
