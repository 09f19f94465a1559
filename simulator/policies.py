"""Eviction policies: the `policy` decorator, the built-in registry, policies loaded from files.

A policy is a score of one candidate's named features (see scoring.FEATURES) and its
parameters; the kernel evicts the candidate of least score, as simrd's Heuristic.choose does
(pool order, the last minimum, a zero score stops the scan). Built-ins and policies of users
go through the same decorator and are compiled into the kernel's scan the same way.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

from simulator import scoring
from simulator.centrality import DEFAULT_SEED
from simulator.errors import PolicyError
from simulator.scoring import COVERING, SCAN, UNCENTRAL


@dataclass(frozen=True)
class Param:
    """One policy parameter: default and admissible range."""

    name: str
    default: float
    low: float = 0.0
    high: float = 1e9
    integer: bool = False

    def check(self, policy: str, value: float) -> float:
        ok = isinstance(value, int | float) and math.isfinite(value)
        ok = ok and self.low <= value <= self.high
        if ok and self.integer:
            ok = float(value).is_integer()
        if not ok:
            kind = "an integer" if self.integer else "a number"
            where = f"policy {policy}, parameter {self.name}"
            raise PolicyError(where, f"{kind} from {self.low} to {self.high}", repr(value))
        return float(value)


@dataclass(frozen=True)
class Policy:
    """One eviction policy: its score function and how the kernel runs it."""

    name: str
    summary: str
    function: Callable = field(repr=False)
    params: tuple[Param, ...] = ()
    rule: int = SCAN  # SCAN; COVERING and UNCENTRAL are kernel-level rules of two built-ins
    monotone: bool = False  # the score never falls as e* or |e*| grow: prune candidates
    simrd_name: str | None = None  # the simrd heuristic class it reproduces, if any
    source: str | None = None  # "file.py:function" or "module:function" when loaded from one
    source_sha256: str | None = None  # of that file's bytes
    analysis: scoring.Analysis = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if type(self.rule) is not int or self.rule not in (SCAN, COVERING, UNCENTRAL):
            expected = f"a kernel rule among {SCAN}, {COVERING}, {UNCENTRAL}"
            raise PolicyError(f"policy {self.name}", expected, repr(self.rule))
        names = tuple(p.name for p in self.params)
        object.__setattr__(self, "analysis", scoring.analyse(self.function, names))

    def __call__(self, candidate, *params):
        """The score, in Python (the reference replay's path)."""
        return self.function(candidate, *params)

    @property
    def features(self) -> frozenset[str]:
        return self.analysis.features

    @property
    def regions(self) -> bool:
        """Reads evicted-neighbourhood regions."""
        return bool(self.analysis.reads & {"forward", "reverse"})

    @property
    def eqclass(self) -> bool:
        """Reads equivalence classes of evicted storages."""
        return "eqclass" in self.analysis.reads

    @property
    def centrality(self) -> bool:
        """Reads the storages' betweenness ranks."""
        return self.rule == UNCENTRAL or "centrality" in self.analysis.reads

    @property
    def budget_dependent(self) -> bool:
        """Its decisions read the budget with no rule saying which budgets decide alike: every
        run certifies its own budget only."""
        return self.rule == SCAN and "budget" in self.analysis.reads

    def resolve(self, given: dict[str, float] | None) -> tuple[tuple[str, float], ...]:
        """Defaults overridden by `given`, checked; unknown names are an error."""
        given = dict(given or {})
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            names = ", ".join(known) or "none"
            raise PolicyError(f"policy {self.name}", f"parameters among: {names}", repr(unknown[0]))
        return tuple(
            (p.name, p.check(self.name, given.get(p.name, p.default))) for p in self.params
        )

    def compiled(self) -> scoring.Compiled:
        return scoring.Compiled(self.name, self.rule, self.monotone, self.analysis)


def policy(
    name: str,
    params: dict[str, float | Param] | None = None,
    *,
    summary: str | None = None,
    monotone: bool = False,
    simrd: str | None = None,
    rule: int = SCAN,
) -> Callable[[Callable], Policy]:
    """Make a score function a policy: `name`, parameters with defaults (a number, or a Param
    for another range than [0, 1e9]), a one-line summary (else the docstring's first line),
    and whether the score is monotone in e* and |e*| (then DTR's pruning applies)."""

    def make(function: Callable) -> Policy:
        line = (summary or (function.__doc__ or "").strip().splitlines() or [""])[0]
        if not line:
            raise PolicyError(scoring.definition(function), "a summary= or a docstring", "neither")
        declared = tuple(
            value if isinstance(value, Param) else Param(key, value)
            for key, value in (params or {}).items()
        )
        return Policy(name, line, function, declared, rule, monotone, simrd)

    return make


# ---------------------------------------------------------------- the built-ins


@policy("dtr", monotone=True, simrd="DTR")
def dtr(c):
    """e* / (size * staleness)"""
    return c.estar / (c.size * c.staleness) if c.size > 0 and c.staleness > 0 else math.inf


@policy("dtr-eqclass", simrd="DTREqClass")
def dtr_eqclass(c):
    """e* over equivalence classes / (size * staleness)"""
    estar = c.class_estar
    return estar / (c.size * c.staleness) if c.size > 0 and c.staleness > 0 else math.inf


@policy("dtr-local", simrd="DTRLocal")
def dtr_local(c):
    """compute / (size * staleness)"""
    return c.compute / (c.size * c.staleness) if c.size > 0 and c.staleness > 0 else math.inf


@policy("msps", simrd="MSPS")  # monotone, but pruning measured 10% slower on its runs
def msps(c):
    """(compute + reverse e*) / size"""
    return (c.compute + c.reverse_compute) / c.size if c.size > 0 else math.inf


@policy("lru", simrd="LRU")
def lru(c):
    """least recently used"""
    return c.last_access


@policy("largest-storage", simrd="LargestStorage")
def largest_storage(c):
    """1 / size"""
    return 1 / c.size if c.size > 0 else math.inf


@policy("nbhd-penalty", {"b": 0.25}, monotone=True)
def nbhd_penalty(c, b):
    """h_DTR * (1 + b * |e*|)"""
    h_dtr = c.estar / (c.size * c.staleness) if c.size > 0 and c.staleness > 0 else math.inf
    return h_dtr * (1 + b * c.nbhd)


@policy(
    "two-phase",
    {"k": Param("k", 8, low=1, high=2**31, integer=True)},
    summary="lowest e*/staleness among storages covering the shortfall, else among the k largest",
    monotone=True,
    rule=COVERING,
)
def two_phase(c, k):
    return c.estar / c.staleness if c.staleness > 0 else math.inf


@policy("he-star", monotone=True)
def he_star(c):
    """|e*| (the DTR paper's h_e*)"""
    return c.nbhd


@policy("cost-stale", monotone=True)
def cost_stale(c):
    """e* / staleness"""
    return c.estar / c.staleness if c.staleness > 0 else math.inf


@policy(
    "tcontrol-inspired",
    {
        "alpha": 0.3,
        "floor": Param("floor", 0.01, high=1.0),
        "seed": Param("seed", DEFAULT_SEED, high=2**32 - 1, integer=True),
    },
    summary="DTR's choice outside the ceil(K*N) most central storages, "
    "K = alpha*residual/budget+floor",
    monotone=True,
    rule=UNCENTRAL,
)
def tcontrol_inspired(c, alpha, floor, seed):
    return c.estar / (c.size * c.staleness) if c.size > 0 and c.staleness > 0 else math.inf


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        dtr,
        dtr_eqclass,
        dtr_local,
        msps,
        lru,
        largest_storage,
        nbhd_penalty,
        two_phase,
        he_star,
        cost_stale,
        tcontrol_inspired,
    )
}


def get_policy(name: str) -> Policy:
    """The policy called `name`: a built-in (simrd's class names are accepted too), or
    `path/to/file.py:attribute` / `package.module:attribute` naming a policy in a file."""
    if isinstance(name, Policy):
        return name
    if name in POLICIES:
        return POLICIES[name]
    for known in POLICIES.values():
        if known.simrd_name == name:
            return known
    if isinstance(name, str) and ":" in name:
        return load_policy(name)
    expected = "one of " + ", ".join(POLICIES) + ", or file.py:name"
    raise PolicyError("--policy", expected, repr(name))


# ---------------------------------------------------------------- policies in files


def load_policy(spec: str) -> Policy:
    """The policy named by `spec` ("file.py:attribute" or "package.module:attribute"), its
    source and the file's sha256 recorded; PolicyError (file:line) if it does not load, is not
    a policy, takes a built-in's name, or fails on a probe candidate."""
    where, _, attribute = spec.rpartition(":")
    path = Path(where) if where.endswith(".py") else _module_file(where, spec)
    if not path.is_file():
        raise PolicyError(spec, "a Python file or an importable module", f"no file {where}")
    data = path.read_bytes()
    return _load(spec, str(path.resolve()), attribute, hashlib.sha256(data).hexdigest())


def _module_file(module: str, spec: str) -> Path:
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as error:
        raise PolicyError(spec, "an importable module", str(error)) from None
    if found is None or not found.origin:
        raise PolicyError(spec, "an importable module", f"no module {module}")
    return Path(found.origin)


@lru_cache(maxsize=64)
def _load(spec: str, path: str, attribute: str, sha256: str) -> Policy:
    module = _import(path, sha256)
    found = getattr(module, attribute, None)
    shown = scoring.relative(path)
    if not isinstance(found, Policy):
        names = [k for k, v in vars(module).items() if isinstance(v, Policy)]
        expected = "a function decorated with @policy, one of: " + (", ".join(names) or "none")
        raise PolicyError(f"{shown}", expected, repr(attribute))
    if found.name in POLICIES:
        line = found.analysis.line
        raise PolicyError(f"{shown}:{line}", "a name no built-in policy has", repr(found.name))
    _probe(found)
    return replace(found, source=spec, source_sha256=sha256)


def _import(path: str, sha256: str):
    name = f"dtr_holes_policy_{sha256[:16]}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except PolicyError:
        raise
    except SyntaxError as error:
        raise PolicyError(
            f"{scoring.relative(path)}:{error.lineno}", "Python that compiles", error.msg
        ) from None
    except Exception as error:  # the user's module: any failure is theirs to see
        raise PolicyError(
            _where_raised(error, path), "a module that imports", _told(error)
        ) from None
    return module


def _where_raised(error: BaseException, path: str) -> str:
    """file:line of the innermost frame of `path` in the error's traceback."""
    line = 0
    for frame in traceback.extract_tb(error.__traceback__):
        if Path(frame.filename).resolve() == Path(path).resolve():
            line = frame.lineno
    return f"{scoring.relative(path)}:{line}" if line else scoring.relative(path)


def _told(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _probe(found: Policy) -> None:
    """Score a candidate whose every feature is 1 with the default parameters, in Python: a
    score that raises or is not a number fails here, with its line, before any replay."""
    candidate = SimpleNamespace(**{name: 1 for name in scoring.FEATURES})
    path = found.analysis.file
    try:
        value = found(candidate, *(p.default for p in found.params))
    except Exception as error:
        where = _where_raised(error, found.function.__code__.co_filename)
        raise PolicyError(
            where, "a score that does not raise (every feature = 1)", _told(error)
        ) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        where = f"{path}:{found.analysis.line}"
        raise PolicyError(where, "a score that is a number", type(value).__name__)


# ---------------------------------------------------------------- compiled sets


def score_set(chosen: Policy) -> tuple[int, scoring.ScoreSet]:
    """The policy's id in its compiled set, and the set: one for all built-ins (one
    compilation of the replay serves them all), one of its own for a policy from a file."""
    if POLICIES.get(chosen.name) is chosen:
        return _BUILTIN_IDS[chosen.name], _builtin_set()
    return 0, _own_set(chosen.compiled())


_BUILTIN_IDS = {name: i for i, name in enumerate(POLICIES)}


@lru_cache(maxsize=1)
def _builtin_set() -> scoring.ScoreSet:
    members = tuple(p.compiled() for p in POLICIES.values())
    return scoring.ScoreSet(members, scoring.cache_directory())


@lru_cache(maxsize=64)
def _own_set(compiled: scoring.Compiled) -> scoring.ScoreSet:
    return scoring.ScoreSet((compiled,), scoring.cache_directory())
