"""The protocol's parameters as a typed, frozen value, read through attributes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# A job's parameters (plan.parameters) hold only the slices of the protocol the job reads: every
# section may be absent (None), and so may every value of a section the job reads in part.
# `from_dict` never changes the dict it reads: the protocol's version hashes that dict, and the
# job specs on the rules' command lines are slices of it.


@dataclass(frozen=True)
class Grid:
    """Ratios from start to stop inclusive, step apart."""

    start: float
    stop: float
    step: float

    @classmethod
    def from_dict(cls, raw: Mapping) -> Grid:
        return cls(raw["start"], raw["stop"], raw["step"])


@dataclass(frozen=True)
class Traces:
    """Trace names by role; `every`: all of them, the roles in the protocol's order."""

    development: tuple[str, ...] = ()
    confirmatory: tuple[str, ...] = ()
    every: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping) -> Traces:
        return cls(
            tuple(raw.get("development", ())),
            tuple(raw.get("confirmatory", ())),
            tuple(t for role in raw.values() for t in role),
        )

    def roles(self) -> dict[str, str]:
        """Each trace's role."""
        return {t: role for role in ("development", "confirmatory") for t in getattr(self, role)}


@dataclass(frozen=True)
class PolicySpec:
    """A policy's parameter values, and the `source` of a policy from a file (else None)."""

    values: Mapping[str, float]
    source: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> PolicySpec:
        values = {k: v for k, v in raw.items() if k != "source"}
        return cls(MappingProxyType(values), raw.get("source"))


@dataclass(frozen=True)
class Limits:
    overhead_cap: float | None = None  # a run stops as thrashed past this multiple of compute
    wall_clock_s: float | None = None  # a run still going after this is unresolved (timeout)

    @classmethod
    def from_dict(cls, raw: Mapping) -> Limits:
        return cls(raw.get("overhead_cap"), raw.get("wall_clock_s"))


@dataclass(frozen=True)
class Repeats:
    """A seeded share of the Stage A grid run `count` times."""

    share: float
    count: int
    seed: int

    @classmethod
    def from_dict(cls, raw: Mapping) -> Repeats:
        return cls(raw["share"], raw["count"], raw["seed"])


@dataclass(frozen=True)
class StageA:
    ratios: Grid | None = None
    repeats: Repeats | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> StageA:
        return cls(_section(Grid, raw.get("ratios")), _section(Repeats, raw.get("repeats")))


@dataclass(frozen=True)
class StageB:
    step: float | None = None
    triggers: tuple[str, ...] | None = None
    overhead_change: float | None = None
    study: str | None = None  # the study's evidence table, relative to the protocol directory

    @classmethod
    def from_dict(cls, raw: Mapping) -> StageB:
        triggers = raw.get("triggers")
        return cls(
            raw.get("step"),
            None if triggers is None else tuple(triggers),
            raw.get("overhead_change"),
            raw.get("study"),
        )


@dataclass(frozen=True)
class StageC:
    step: float
    dense_below: float
    dense: int
    sparse: int
    seed: int

    @classmethod
    def from_dict(cls, raw: Mapping) -> StageC:
        return cls(raw["step"], raw["dense_below"], raw["dense"], raw["sparse"], raw["seed"])


@dataclass(frozen=True)
class PointSet:
    """Every ratio run once per repeat index by each of the policies ("all": every one)."""

    trace: str
    policies: str | tuple[str, ...]
    ratios: Grid | tuple[float, ...]
    repeats: tuple[int, ...]

    @classmethod
    def from_dict(cls, raw: Mapping) -> PointSet:
        policies, ratios = raw["policies"], raw["ratios"]
        return cls(
            raw["trace"],
            policies if isinstance(policies, str) else tuple(policies),
            Grid.from_dict(ratios) if isinstance(ratios, Mapping) else tuple(ratios),
            tuple(raw["repeats"]),
        )

    def runs(self, policy: str) -> bool:
        return self.policies == "all" or policy in self.policies


@dataclass(frozen=True)
class Confirmation:
    repeats: int | None = None
    points: str | None = None  # brackets or region
    simrd: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> Confirmation:
        simrd = raw.get("simrd")
        return cls(raw.get("repeats"), raw.get("points"), None if simrd is None else tuple(simrd))


@dataclass(frozen=True)
class Edges:
    """The exact edges' search; an omitted option has its schema's default (exact_edge's)."""

    max_runs: int | None = None
    split: float = 0.5
    probe_factor: float | None = None
    probe_floor: float = 1.0
    probe_raise: bool = False

    @classmethod
    def from_dict(cls, raw: Mapping) -> Edges:
        return cls(**raw)


@dataclass(frozen=True)
class Explain:
    top: int
    decisions: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> Explain:
        return cls(raw["top"], raw.get("decisions"))


@dataclass(frozen=True)
class Maps:
    margin: float | None = None
    max_runs: int | None = None
    whole_range_cap: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> Maps:
        return cls(raw.get("margin"), raw.get("max_runs"), raw.get("whole_range_cap"))


@dataclass(frozen=True)
class Parameters:
    """The protocol's parameters (or a job's slice of them), one attribute per section."""

    traces: Traces | None = None
    policies: Mapping[str, PolicySpec] = field(default_factory=lambda: MappingProxyType({}))
    frozen: tuple[str, ...] = ()
    limits: Limits | None = None
    stage_a: StageA | None = None
    stage_b: StageB | None = None
    stage_c: StageC | None = None
    points: Mapping[str, tuple[PointSet, ...]] = field(default_factory=lambda: MappingProxyType({}))
    confirmation: Confirmation | None = None
    edges: Edges | None = None
    explain: Explain | None = None
    maps: Maps | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Parameters:
        """From the validated parameters or a job's slice of them (absent values: None)."""
        policies = {
            name: PolicySpec.from_dict(values)
            for name, values in (raw.get("policies") or {}).items()
            if values is not None
        }
        points = {
            stage: tuple(PointSet.from_dict(s) for s in sets)
            for stage, sets in (raw.get("points") or {}).items()
            if sets is not None
        }
        return cls(
            traces=_section(Traces, raw.get("traces")),
            policies=MappingProxyType(policies),
            frozen=tuple(raw.get("frozen") or ()),
            limits=_section(Limits, raw.get("limits")),
            stage_a=_section(StageA, raw.get("stage_a")),
            stage_b=_section(StageB, raw.get("stage_b")),
            stage_c=_section(StageC, raw.get("stage_c")),
            points=MappingProxyType(points),
            confirmation=_section(Confirmation, raw.get("confirmation")),
            edges=_section(Edges, raw.get("edges")),
            explain=_section(Explain, raw.get("explain")),
            maps=_section(Maps, raw.get("maps")),
        )

    def policy_ref(self, name: str) -> str:
        """What simulator.get_policy resolves for the protocol's policy `name`: the `source` of
        a policy from a file (file.py:function or module:function), else the name."""
        source = self.policies[name].source
        return name if source is None else source

    def policy_values(self, name: str) -> dict[str, float]:
        """The parameter values the protocol gives policy `name`."""
        return dict(self.policies[name].values)


def _section(kind: Any, raw: Mapping | None) -> Any:
    """A section's typed value, None where the parameters (or a job's slice) have none."""
    return None if raw is None else kind.from_dict(raw)
