"""An explanation of a feasibility hole as frozen types, and its one JSON form."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field

from simulator import UserError

Score = float | str  # "inf" where a storage of 0 bytes scores infinite: JSON has no infinity
OPTIONAL_KEY = {"optional_key": True}  # None is written as no key at all
MAPPING = {"mapping": True}  # (name, value) pairs written as a JSON object


class ExplanationError(UserError):
    """An explanation whose JSON is not of the shape these types give it."""


@dataclass(frozen=True)
class RunSummary:
    """What an explanation states of one run."""

    budget: int
    ratio: float | None  # of the trace's peak memory, when known
    outcome: str
    overhead: float
    evictions: int
    rematerializations: int
    max_depth: int
    eviction_seq_sha256: str


@dataclass(frozen=True)
class Decision:
    """An eviction decision: the storage chosen, its score, and the allocation's shortfall
    (bytes in use + request - budget)."""

    decision: int  # numbered from 0 in its run
    step: int
    op: int
    storage: str
    size: int
    score: Score
    shortfall: int


@dataclass(frozen=True)
class Candidate:
    """A storage a decision could choose, with its score's components."""

    storage: str
    e_star: int
    size: int
    staleness: int
    neighbourhood: int
    score: Score


@dataclass(frozen=True)
class RankedDecision(Decision):
    """A decision with the best candidates it weighed; `rank`: the chosen one's among the
    `candidates` evaluated (None where the policy orders otherwise)."""

    rank: int | None
    candidates: int
    top: tuple[Candidate, ...]


@dataclass(frozen=True)
class EventCounts:
    evictions: int
    rematerializations: int


@dataclass(frozen=True)
class CountsByRun:
    ok: EventCounts
    fail: EventCounts


@dataclass(frozen=True)
class Divergence:
    """The common prefix of the two runs' decisions, the first that differs (None: the run
    decides no further) and what each run did before and after it."""

    common_prefix: int
    step: int | None
    ok: Decision | None
    fail: Decision | None
    before: CountsByRun
    after: CountsByRun


@dataclass(frozen=True)
class SameAllocation:
    """What the other run did at the allocation check where a run decided: its shortfall
    (None: it never met that check; at most 0: it fit), what it evicted and the bytes freed."""

    step: int
    op: int
    shortfall: int | None
    evicted: tuple[str, ...]
    freed: int


@dataclass(frozen=True)
class Decisive:
    """The failing run's removal of the storage to retain, and the completing run's
    contrasting decision, each with what the other run did at the same allocation."""

    storage: str
    size: int
    removed_by: str  # "evict" or "free"
    removed_at_step: int
    needed_at_step: int | None  # None: the failure does not rebuild it
    ok_holds_it: bool
    eviction: RankedDecision | None
    contrast: RankedDecision | None
    failing_at_contrast: SameAllocation | None
    completing_at_eviction: SameAllocation | None


@dataclass(frozen=True)
class StepFailure:
    op: int
    outcome: str
    depth: int


@dataclass(frozen=True)
class StepActivity:
    """What one step of the probe's window did."""

    step: int
    evicted: tuple[str, ...]
    remats: int
    depth: int
    failed: StepFailure | None = field(default=None, metadata=OPTIONAL_KEY)


@dataclass(frozen=True)
class ProbedRun:
    """One run's decisions in the window (first and last halves when capped) and its steps."""

    decisions: tuple[RankedDecision, ...]
    omitted: int  # decisions of the window's middle left out
    steps: tuple[StepActivity, ...]


@dataclass(frozen=True)
class Probe:
    first_step: int
    last_step: int
    top: int
    ok: ProbedRun
    fail: ProbedRun


@dataclass(frozen=True)
class FailurePoint:
    """Where and how the failing run stopped."""

    step: int
    op: int
    outcome: str
    depth: int
    pinned: int
    request: int
    over_budget: int


@dataclass(frozen=True)
class Rebuilding:
    """A storage being rebuilt when the failing run stopped, with how it last left memory
    (None throughout: it never did) and the completing run's first eviction of it."""

    storage: str
    op: int
    depth: int
    size: int | None
    removed_by: str | None
    evicted_by_decision: int | None
    evicted_at_step: int | None
    steps_before_failure: int | None
    ok_run_first_evicted_at_step: int | None


@dataclass(frozen=True)
class Cascade(FailurePoint):
    """The failure and the rematerializations in progress, outermost first."""

    rebuilding: tuple[Rebuilding, ...]


@dataclass(frozen=True)
class Retention:
    """The failing budget rerun with the storage never a candidate, and a control retaining
    nothing that must reproduce the failure for the test to be valid."""

    storage: str
    intervention: RunSummary
    control: RunSummary
    control_reproduces_failure: bool
    valid: bool
    retaining_completes: bool


@dataclass(frozen=True)
class EvictionNumbers:
    """The mechanism's account of the failing run's eviction of the storage."""

    completing_shortfall: int | None
    completing_evicted: tuple[str, ...]
    completing_freed: int
    step: int
    shortfall: int
    rank: int | None
    score: Score
    candidates: int
    runner_up: str | None
    runner_up_score: Score | None


@dataclass(frozen=True)
class ContrastNumbers:
    """The mechanism's account of the completing run's contrasting eviction."""

    step: int
    storage: str
    size: int
    shortfall: int
    op: int
    failing_shortfall: int | None
    failing_evicted: tuple[str, ...]
    failing_freed: int


@dataclass(frozen=True)
class RetentionNumbers:
    outcome: str
    overhead: float
    valid: bool


@dataclass(frozen=True)
class Mechanism:
    """The explanation's story in numbers and sentences, derived from its other parts."""

    budget_difference: int
    storage: str | None  # None: the failing run removed nothing to retain
    size: int | None
    removed_by: str | None
    removed_at_step: int | None
    needed_at_step: int | None
    steps_until_failure: int | None
    eviction: EvictionNumbers | None
    contrast: ContrastNumbers | None
    failure: FailurePoint
    retention: RetentionNumbers | None
    text: str


@dataclass(frozen=True)
class Citations:
    """The run ids of the records the two runs are."""

    ok: str
    fail: str


@dataclass(frozen=True)
class Explanation:
    """Why a budget fails where another completes: divergence, decisive decisions, probe,
    cascade and retention, summed up by the mechanism."""

    mechanism: Mechanism
    trace: str
    trace_sha256: str
    policy: str
    params: tuple[tuple[str, float], ...] = field(metadata=MAPPING)
    overhead_cap: float | None
    peak_memory: int | None
    ok: RunSummary
    fail: RunSummary
    divergence: Divergence
    decisive: Decisive | None
    probe: Probe
    cascade: Cascade
    retention: Retention | None
    cites: Citations | None = field(default=None, metadata=OPTIONAL_KEY)


def to_json(x: Explanation) -> dict:
    """The explanation as JSON values: each part an object of its fields, tuples as lists."""
    return _plain(x)


def _plain(value: object) -> object:
    if dataclasses.is_dataclass(value):
        return {
            f.name: dict(v) if f.metadata.get("mapping") else _plain(v)
            for f in dataclasses.fields(value)
            if (v := getattr(value, f.name)) is not None or not f.metadata.get("optional_key")
        }
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def from_json(value: object) -> Explanation:
    """The explanation `to_json` gave `value`; ExplanationError names the first part that is
    not of its type."""
    return _parser(Explanation)(value, "explanation")


Parser = Callable[[object, str], object]  # a JSON value and where it is -> the typed value


@functools.cache
def _parser(kind: object) -> Parser:
    """The parser of one type, made once: an audit reads megabytes of explanations."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if dataclasses.is_dataclass(kind):
        return functools.partial(_parsed_fields, kind)
    if origin is types.UnionType:
        return functools.partial(_parsed_union, args)
    if origin is tuple:
        return functools.partial(_parsed_list, args[0])
    return functools.partial(_parsed_scalar, kind)


def _parsed_fields(kind: type, value: object, where: str) -> object:
    if not isinstance(value, dict):
        raise ExplanationError(where, f"an object ({kind.__name__})", repr(value)[:80])
    keys = _keys(kind)
    if unknown := sorted(value.keys() - keys.keys()):
        raise ExplanationError(where, f"the keys of {kind.__name__}", f"also {unknown}")
    parsed = {}
    for name, (parse, optional) in keys.items():
        if name in value:
            parsed[name] = parse(value[name], f"{where}.{name}")
        elif not optional:
            raise ExplanationError(where, f"a key {name!r}", "none")
    return kind(**parsed)


@functools.cache
def _keys(kind: type) -> dict[str, tuple[Parser, bool]]:
    """Per field of `kind`: the parser of its value and whether its key may be absent."""
    hints = typing.get_type_hints(kind)
    return {
        f.name: (
            functools.partial(_parsed_mapping, hints[f.name])
            if f.metadata.get("mapping")
            else _parser(hints[f.name]),
            bool(f.metadata.get("optional_key")),
        )
        for f in dataclasses.fields(kind)
    }


def _parsed_union(options: tuple, value: object, where: str) -> object:
    """The first option `value` is of; with one besides None, that option's own complaint."""
    if value is None and type(None) in options:
        return None
    rest = [option for option in options if option is not type(None)]
    if len(rest) == 1:
        return _parser(rest[0])(value, where)
    for option in rest:
        try:
            return _parser(option)(value, where)
        except ExplanationError:
            pass
    raise ExplanationError(where, " or ".join(map(_name, options)), repr(value)[:80])


def _parsed_list(item: object, value: object, where: str) -> tuple:
    if not isinstance(value, list):
        raise ExplanationError(where, "a list", repr(value)[:80])
    parse = _parser(item)
    return tuple(parse(v, f"{where}[{i}]") for i, v in enumerate(value))


def _parsed_mapping(kind: object, value: object, where: str) -> tuple:
    """(name, value) pairs from a JSON object: `kind` is tuple[tuple[str, V], ...]."""
    if not isinstance(value, dict):
        raise ExplanationError(where, "an object", repr(value)[:80])
    parse = _parser(typing.get_args(typing.get_args(kind)[0])[1])
    return tuple((k, parse(v, f"{where}.{k}")) for k, v in value.items())


def _parsed_scalar(kind: type, value: object, where: str) -> object:
    """A JSON scalar of `kind`: a float may be written as an integer, but a bool is no number."""
    accepted = (int, float) if kind is float else kind
    if (kind is bool) == isinstance(value, bool) and isinstance(value, accepted):
        return value
    raise ExplanationError(where, _name(kind), repr(value)[:80])


def _name(kind: object) -> str:
    names = {type(None): "null", int: "an integer", float: "a number", str: "a string"}
    return {**names, bool: "a boolean"}.get(kind, getattr(kind, "__name__", str(kind)))
