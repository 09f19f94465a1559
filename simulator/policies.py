"""The registry of eviction policies: name, kernel rule, runtime features read, parameters."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator import kernel
from simulator.errors import PolicyError


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
    """One eviction policy as the kernel runs it."""

    name: str
    rule: int  # kernel policy id
    summary: str
    simrd_name: str | None = None  # the simrd heuristic class it reproduces, if any
    regions: bool = False  # reads evicted-neighbourhood regions
    eqclass: bool = False  # reads equivalence classes of evicted storages
    centrality: bool = False  # reads the storages' betweenness ranks
    params: tuple[Param, ...] = ()

    def __post_init__(self) -> None:
        known = isinstance(self.rule, int) and not isinstance(self.rule, bool)
        if not (known and self.rule in kernel.RULES):
            expected = "a kernel rule id among " + ", ".join(map(str, kernel.RULES))
            raise PolicyError(f"policy {self.name}", expected, repr(self.rule))

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


POLICIES: dict[str, Policy] = {}


def register(policy: Policy) -> Policy:
    POLICIES[policy.name] = policy
    return policy


register(Policy("dtr", kernel.DTR, "e* / (size * staleness)", "DTR", regions=True))
register(
    Policy(
        "dtr-eqclass",
        kernel.DTR_EQCLASS,
        "e* over equivalence classes / (size * staleness)",
        "DTREqClass",
        eqclass=True,
    )
)
register(Policy("dtr-local", kernel.DTR_LOCAL, "compute / (size * staleness)", "DTRLocal"))
register(Policy("msps", kernel.MSPS, "(compute + reverse e*) / size", "MSPS", regions=True))
register(Policy("lru", kernel.LRU, "least recently used", "LRU"))
register(Policy("largest-storage", kernel.LARGEST_STORAGE, "1 / size", "LargestStorage"))
register(
    Policy(
        "nbhd-penalty",
        kernel.NBHD_PENALTY,
        "h_DTR * (1 + b * |e*|)",
        regions=True,
        params=(Param("b", 0.25),),
    )
)
register(
    Policy(
        "two-phase",
        kernel.TWO_PHASE,
        "lowest e*/staleness among storages covering the shortfall, else among the k largest",
        regions=True,
        params=(Param("k", 8, low=1, high=2**31, integer=True),),
    )
)
register(Policy("he-star", kernel.HE_STAR, "|e*| (the DTR paper's h_e*)", regions=True))
register(Policy("cost-stale", kernel.COST_STALE, "e* / staleness", regions=True))
register(
    Policy(
        "tcontrol-inspired",
        kernel.TCONTROL,
        "DTR's choice outside the ceil(K*N) most central storages, K = alpha*residual/budget+floor",
        regions=True,
        centrality=True,
        params=(
            Param("alpha", 0.3),
            Param("floor", 0.01, high=1.0),
            Param("seed", 20260926, high=2**32 - 1, integer=True),
        ),
    )
)


def get_policy(name: str) -> Policy:
    """The registered policy called `name` (simrd's class names are accepted too)."""
    if name in POLICIES:
        return POLICIES[name]
    for policy in POLICIES.values():
        if policy.simrd_name == name:
            return policy
    raise PolicyError("--policy", "one of " + ", ".join(POLICIES), repr(name))
