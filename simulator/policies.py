"""The registry of eviction policies: name, kernel rule, runtime features read, parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator import kernel
from simulator.errors import PolicyError


@dataclass(frozen=True)
class Policy:
    """One eviction policy as the kernel runs it."""

    name: str
    rule: int  # kernel policy id
    simrd_name: str | None  # the simrd heuristic class it reproduces, if any
    regions: bool = False  # reads evicted-neighbourhood regions
    eqclass: bool = False  # reads equivalence classes of evicted storages
    defaults: dict[str, float] = field(default_factory=dict)
    summary: str = ""

    def resolve(self, params: dict[str, float] | None) -> tuple[tuple[str, float], ...]:
        """Defaults overridden by `params`; unknown names are an error."""
        given = dict(params or {})
        unknown = sorted(set(given) - set(self.defaults))
        if unknown:
            known = ", ".join(self.defaults) or "none"
            raise PolicyError(f"policy {self.name}", f"parameters among: {known}", repr(unknown[0]))
        return tuple(sorted({**self.defaults, **given}.items()))


POLICIES: dict[str, Policy] = {}


def register(policy: Policy) -> Policy:
    POLICIES[policy.name] = policy
    return policy


register(Policy("dtr", kernel.DTR, "DTR", regions=True, summary="e* / (size * staleness)"))
register(
    Policy(
        "dtr-eqclass",
        kernel.DTR_EQCLASS,
        "DTREqClass",
        eqclass=True,
        summary="e* over equivalence classes / (size * staleness)",
    )
)
register(Policy("dtr-local", kernel.DTR_LOCAL, "DTRLocal", summary="compute / (size * staleness)"))
register(Policy("msps", kernel.MSPS, "MSPS", regions=True, summary="(compute + reverse e*) / size"))
register(Policy("lru", kernel.LRU, "LRU", summary="least recently used"))
register(Policy("largest-storage", kernel.LARGEST_STORAGE, "LargestStorage", summary="1 / size"))


def get_policy(name: str) -> Policy:
    """The registered policy called `name` (simrd's class names are accepted too)."""
    if name in POLICIES:
        return POLICIES[name]
    for policy in POLICIES.values():
        if policy.simrd_name == name:
            return policy
    raise PolicyError("--policy", "one of " + ", ".join(POLICIES), repr(name))
