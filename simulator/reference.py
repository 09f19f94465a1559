"""A pure-Python reference replay of simrd's RuntimeV2EagerOptimized: slow, obviously correct.

It runs any policy (a built-in's name or `file.py:name`, see simulator.policies) by calling
its score function in plain Python on a `Candidate`, without the compiled kernel, for
prototyping a score and as the cross-check of the kernel on random traces: `simulate(trace,
budget, "dtr", params)` takes the policy and its parameters as `simulator.simulate` does.

Evicted neighbourhoods are recomputed from scratch at every score. simrd instead keeps them up to
date at evictions and recomputations, so an operator that has not run yet is invisible to them:
we get the same by ignoring tensors whose operator never ran (`Tensor.born`). simrd can still
see such a pending operator, depending on history, when a new operator with two or more evicted
arguments waits for them to be recomputed (traces with joins): there this replay can decide
otherwise than simrd. `tests.support.tracegen` avoids that by default. The compiled path
(`simulator.simulate`) stays the fidelity reference.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simulator import centrality
from simulator.policies import Policy, get_policy
from simulator.scoring import COVERING, UNCENTRAL
from simulator.trace import COMPUTE, GET, PIN, RELEASE, Trace


@dataclass(eq=False)
class EqClass:
    """A set of evicted storages whose recomputation costs are lumped together (DTREqClass)."""

    value: int
    members: set[Storage] = field(default_factory=set)


@dataclass(eq=False)
class Op:
    """One operator of the trace; running it defines all of its outputs at once."""

    cost: int
    outputs: list[Tensor] = field(default_factory=list)

    @property
    def total_size(self) -> int:
        return sum(t.size for t in self.outputs)


@dataclass(eq=False)
class Storage:
    """A buffer shared by a tensor and its aliases; the unit that is evicted."""

    size: int
    index: int  # storages are numbered in creation order (centrality ranks are indexed so)
    root: int  # id of the tensor that allocated it (TwoPhase's last tie-break)
    tensors: list[Tensor] = field(default_factory=list)
    material: bool = False
    locks: int = 0
    refs: int = 0
    pinned: bool = False
    last_access: float = -math.inf
    eq_class: EqClass | None = None
    times_evicted: int = 0

    @property
    def root_name(self) -> str:
        return self.tensors[0].name

    @property
    def compute(self) -> int:
        """Cost of every distinct operator that wrote a tensor of this storage."""
        ops = {id(t.op): t.op for t in self.tensors}
        return sum(op.cost for op in ops.values())

    @property
    def born(self) -> bool:
        return self.tensors[0].born

    @property
    def born_compute(self) -> int:
        """`compute` without views created but not run yet (what simrd's regions hold)."""
        ops = {id(t.op): t.op for t in self.tensors if t.born}
        return sum(op.cost for op in ops.values())


@dataclass(eq=False)
class Tensor:
    """One output of one operator, living in a storage (its own or, for an alias, a parent's)."""

    name: str
    op: Op
    size: int  # bytes this output allocates (0 for an alias)
    storage: Storage
    parents: list[Tensor]
    children: list[Tensor] = field(default_factory=list)
    defined: bool = False
    born: bool = False  # its operator has run at least once

    @property
    def siblings(self) -> list[Tensor]:
        return [u for u in self.op.outputs if u is not self]


class OutOfMemory(Exception):
    """The evictable pool ran dry before an allocation fit."""


class Thrashed(Exception):
    """Rematerialization compute went over the limit."""


def evicted_region(s: Storage, step: Callable[[Tensor], list[Tensor]]) -> set[Storage]:
    """Evicted storages reachable from `s` along `step`, not crossing material storages."""
    found: set[Storage] = set()

    def visit(storage: Storage) -> None:
        for t in storage.tensors:
            for u in step(t):
                if u.storage.born and not u.storage.material and u.storage not in found:
                    found.add(u.storage)
                    visit(u.storage)

    visit(s)
    return found


def region_compute(s: Storage, step: Callable[[Tensor], list[Tensor]]) -> int:
    return sum(u.born_compute for u in evicted_region(s, step))


def evicted_neighbours(s: Storage) -> set[Storage]:
    """Evicted storages one parent or child edge away from `s`."""
    near = {u.storage for t in s.tensors for u in t.parents + t.children}
    return {n for n in near if not n.material and n is not s}


def children(t: Tensor) -> list[Tensor]:
    return t.children


def parents(t: Tensor) -> list[Tensor]:
    return t.parents


def region_count(s: Storage) -> int:
    """|e*(s)|: storages in the forward and in the reverse evicted region."""
    return len(evicted_region(s, children)) + len(evicted_region(s, parents))


Params = dict[str, float]


@dataclass(frozen=True)
class Moment:
    """What a score reads besides its candidate, at one decision: the replay's clock, the
    bytes in use, the request waiting, the budget and the storages' centrality ranks."""

    clock: float
    memory: int
    request: int
    budget: int
    ranks: np.ndarray | None


class Candidate:
    """One eviction candidate's features (scoring.FEATURES), as a policy's score reads them."""

    def __init__(self, s: Storage, moment: Moment):
        self.s, self.moment = s, moment

    compute = property(lambda self: self.s.compute)
    size = property(lambda self: self.s.size)
    staleness = property(lambda self: self.moment.clock - self.s.last_access)
    last_access = property(lambda self: self.s.last_access)
    forward_compute = property(lambda self: region_compute(self.s, children))
    reverse_compute = property(lambda self: region_compute(self.s, parents))
    estar = property(lambda self: self.s.compute + self.forward_compute + self.reverse_compute)
    nbhd = property(lambda self: region_count(self.s))
    times_evicted = property(lambda self: self.s.times_evicted)
    centrality = property(lambda self: int(self.moment.ranks[self.s.index]))
    memory = property(lambda self: self.moment.memory)
    request = property(lambda self: self.moment.request)
    budget = property(lambda self: self.moment.budget)
    shortfall = property(lambda self: self.memory + self.request - self.budget)

    @property
    def class_estar(self) -> int:
        classes = {id(n.eq_class): n.eq_class for n in evicted_neighbours(self.s)}
        return self.s.compute + sum(c.value for c in classes.values())


def build_graph(trace: Trace) -> tuple[list[Op], list[Tensor]]:
    """Plain objects for every operator and tensor, with storages shared by aliases.

    Tensors join their storage and their parents' children only when created (`Replay.create`):
    simrd's graph grows as the replay goes, so a not-yet-run operator must be invisible.
    """
    ops: list[Op] = []
    tensors: list[Tensor] = []
    n_storages = 0
    for i in range(trace.n_ops):
        op = Op(int(trace.op_cost[i]))
        args = [tensors[a] for a in trace.op_args[trace.op_arg_ptr[i] : trace.op_arg_ptr[i + 1]]]
        for t in range(trace.op_out_ptr[i], trace.op_out_ptr[i + 1]):
            alias = int(trace.tensor_alias[t])
            size = int(trace.tensor_size[t])
            if alias >= 0:
                storage = args[alias].storage
            else:
                storage = Storage(size, index=n_storages, root=t)
                n_storages += 1
            tensor = Tensor(trace.tensor_names[t], op, size, storage, args)
            op.outputs.append(tensor)
            tensors.append(tensor)
        ops.append(op)
    return ops, tensors


def join_eq_class(s: Storage) -> None:
    """Give just-evicted `s` a fresh class, then merge every distinct class of its evicted
    neighbours into it."""
    mine = EqClass(s.compute, {s})
    s.eq_class = mine
    for n in evicted_neighbours(s):
        theirs = n.eq_class
        if theirs is not mine:
            mine.value += theirs.value
            mine.members |= theirs.members
            for m in theirs.members:
                m.eq_class = mine


def leave_eq_class(s: Storage) -> None:
    """Just-computed `s` leaves its class. simrd never splits a class: the rest stays
    together, only the value drops."""
    s.eq_class.value -= s.compute
    s.eq_class.members.discard(s)
    s.eq_class = None


class Memory:
    """Bytes in use, their peak, and the evictable pool in simrd's order (insertion)."""

    def __init__(self) -> None:
        self.used = 0
        self.peak = 0
        self.pool: list[Storage] = []

    def allocate(self, size: int) -> None:
        self.used += size
        self.peak = max(self.peak, self.used)

    def lock(self, s: Storage) -> None:
        assert s.material
        if s.locks == 0:
            self.pool.remove(s)
        s.locks += 1

    def unlock(self, s: Storage) -> None:
        s.locks -= 1
        if s.locks == 0:
            self.pool.append(s)

    def evict(self, s: Storage) -> None:
        assert s.locks == 0 and not s.pinned
        s.material = False
        self.used -= s.size
        self.pool.remove(s)
        for t in s.tensors:
            t.defined = False
        join_eq_class(s)


class Chooser:
    """A policy's choice of a victim among the pool's storages, as simrd's heuristics make it,
    with the evaluations and lock fallbacks it counts."""

    def __init__(self, policy: Policy, params: Params, ranks: np.ndarray | None):
        self.policy = policy
        self.params = params
        self.ranks = ranks
        self.evals = 0
        self.lock_fallbacks = 0

    def choose(self, pool: list[Storage], moment: Moment) -> Storage:
        if self.policy.rule == COVERING:
            return self.choose_covering(pool, moment)
        if self.policy.rule == UNCENTRAL:
            return self.choose_uncentral(pool, moment)
        return self.scan(pool, moment)

    def score(self, s: Storage, moment: Moment) -> float:
        return self.policy(Candidate(s, moment), *self.params.values())

    def scan(self, candidates: list[Storage], moment: Moment) -> Storage:
        """The last candidate of minimal score, stopping early at the first zero score."""
        best_score, best = math.inf, None
        for s in candidates:
            score = self.score(s, moment)
            self.evals += 1
            if score <= best_score:
                best_score, best = score, s
            if score == 0:
                break
        return best

    def choose_covering(self, pool: list[Storage], moment: Moment) -> Storage:
        """TwoPhase: the lowest e*/staleness among storages that alone cover the shortfall (else
        among the k largest), ties to the larger, then the older storage."""
        need = max(moment.memory + moment.request - moment.budget, 1)
        candidates = [s for s in pool if s.size >= need]
        if not candidates:
            by_size = sorted(pool, key=lambda s: (-s.size, s.root))
            candidates = by_size[: int(self.params["k"])]
        self.evals += len(candidates)
        return min(candidates, key=lambda s: (self.score(s, moment), -s.size, s.root))

    def choose_uncentral(self, pool: list[Storage], moment: Moment) -> Storage:
        """TControlInspired: DTR's choice outside the ceil(K*N) most central storages."""
        budget = moment.budget
        residual = max(budget - moment.memory, 0)
        share = self.params["alpha"] * residual / budget if budget > 0 else 0.0
        n_locked = math.ceil((share + self.params["floor"]) * len(self.ranks))
        unlocked = [s for s in pool if self.ranks[s.index] >= n_locked]
        if unlocked:
            return self.scan(unlocked, moment)
        self.lock_fallbacks += 1
        return self.scan(pool, moment)


class Replay:
    """One replay's runtime; every method mirrors one step of simrd's."""

    def __init__(self, budget: int, chooser: Chooser, remat_limit: float):
        self.budget = budget
        self.chooser = chooser
        self.remat_limit = remat_limit
        self.memory = Memory()
        self.clock = 1
        self.model_compute = 0
        self.remat_compute = 0
        self.evicted: list[str] = []
        self.eager_frees = 0

    def free(self, size: int) -> None:
        memory = self.memory
        while memory.used + size > self.budget:
            if not memory.pool:
                raise OutOfMemory
            moment = Moment(self.clock, memory.used, size, self.budget, self.chooser.ranks)
            victim = self.chooser.choose(memory.pool, moment)
            victim.times_evicted += 1
            memory.evict(victim)
            self.evicted.append(victim.root_name)

    def run_op(self, t: Tensor, remat: bool) -> None:
        """Execute `t`'s operator, defining every output and pooling newly material storages."""
        order = [*t.siblings, t]
        fresh = [u.storage for u in order if not u.storage.material]
        already = [u for u in t.siblings if u.defined]
        self.clock += t.op.cost
        self.memory.allocate(t.op.total_size)
        if remat:
            self.remat_compute += t.op.cost
        else:
            self.model_compute += t.op.cost
        for u in order:
            u.storage.material = True
            u.defined = True
            u.born = True
        # Outputs that were already in memory were computed twice; drop the duplicate bytes.
        self.memory.used -= sum(u.size for u in already)
        for s in fresh:
            if s not in self.memory.pool:
                self.memory.pool.append(s)
            leave_eq_class(s)

    def materialize(self, t: Tensor, remat: bool) -> None:
        for p in t.parents:
            p.storage.last_access = self.clock
        missing = [p for p in t.parents if not p.defined]
        for p in t.parents:
            if p.defined:
                self.memory.lock(p.storage)
        for p in missing:
            if not p.defined:  # a sibling's recomputation may have defined it meanwhile
                self.materialize(p, remat=True)
            self.memory.lock(p.storage)
        self.free(t.op.total_size)
        self.run_op(t, remat)
        for p in t.parents:
            self.memory.unlock(p.storage)
        if self.remat_compute > self.remat_limit:
            raise Thrashed

    def create(self, op: Op) -> None:
        for t in op.outputs:
            if not t.storage.tensors:
                # As in simrd, a storage not computed yet counts as evicted, in a class worth 0
                # that evictions may merge into theirs; its first computation then subtracts
                # its cost from that merged class.
                t.storage.eq_class = EqClass(0, {t.storage})
            t.storage.tensors.append(t)
            t.storage.refs += 1
        for parent in op.outputs[0].parents:
            parent.children.extend(op.outputs)
        self.materialize(op.outputs[0], remat=False)
        for t in op.outputs:
            t.storage.last_access = self.clock

    def pin(self, t: Tensor) -> None:
        if not t.defined:
            self.materialize(t, remat=True)
        if not t.storage.pinned:
            self.memory.lock(t.storage)
            t.storage.pinned = True

    def release(self, t: Tensor) -> None:
        s = t.storage
        s.refs -= 1
        if s.refs == 0 and s.material and not s.pinned:
            self.memory.evict(s)
            self.eager_frees += 1

    def step(self, kind: int, arg: int, ops: list[Op], tensors: list[Tensor]) -> None:
        if kind == COMPUTE:
            self.create(ops[arg])
        elif kind == GET:
            tensors[arg].storage.refs += 1
        elif kind == PIN:
            self.pin(tensors[arg])
        elif kind == RELEASE:
            self.release(tensors[arg])

    def summary(self, outcome: str) -> dict:
        return {
            "outcome": outcome,
            "clock": self.clock,
            "model_compute": self.model_compute,
            "remat_compute": self.remat_compute,
            "peak_memory": self.memory.peak,
            "evictions": len(self.evicted),
            "evicted": list(self.evicted),
            "heuristic_evals": self.chooser.evals,
            "eager_frees": self.eager_frees,
            "lock_fallbacks": self.chooser.lock_fallbacks,
        }


def simulate(
    trace: Trace,
    budget: int,
    policy: str = "dtr",
    params: Params | None = None,
    *,
    remat_limit: float = math.inf,
    ranks: np.ndarray | None = None,
) -> dict:
    """Replay `trace` under `budget` bytes with a policy (see module docstring), the slow way.

    `policy` and `params` as `simulator.simulate` takes them: an unknown policy or parameter is a
    PolicyError. `remat_limit`: the rematerialization compute above which the run is "thrashed".
    `ranks`: each storage's centrality rank (0 = most central) for tcontrol-inspired; computed
    with simulator.centrality and the `seed` param if not given. Returns a dict: outcome ("ok",
    "oom" or "thrashed"), clock, model_compute, remat_compute, peak_memory, evictions, evicted
    (root tensor names in eviction order), heuristic_evals, eager_frees, lock_fallbacks.
    """
    chosen = get_policy(policy)
    resolved = dict(chosen.resolve(params))
    if ranks is None and chosen.centrality:
        seed = int(resolved.get("seed", centrality.DEFAULT_SEED))
        ranks = centrality.ranks(centrality.betweenness(trace, seed))
    ops, tensors = build_graph(trace)
    replay = Replay(budget, Chooser(chosen, resolved, ranks), remat_limit)
    try:
        for kind, arg in zip(trace.cmd_kind.tolist(), trace.cmd_arg.tolist(), strict=True):
            replay.step(kind, arg, ops, tensors)
    except OutOfMemory:
        return replay.summary("oom")
    except Thrashed:
        return replay.summary("thrashed")
    return replay.summary("ok")


def simulate_capped(
    trace: Trace,
    budget: int,
    policy: str,
    overhead_cap: float | None,
    params: Params | None = None,
    *,
    ranks: np.ndarray | None = None,
) -> dict:
    """`simulate` under simulator.simulate's overhead cap (remat compute up to model compute ×
    (cap − 1)), with the digest of its eviction sequence as `eviction_seq_sha256`."""
    limit = math.inf if overhead_cap is None else trace.model_compute * (overhead_cap - 1)
    run = simulate(trace, budget, policy, params, remat_limit=limit, ranks=ranks)
    digest = hashlib.sha256("\n".join(run["evicted"]).encode()).hexdigest()
    return {**run, "eviction_seq_sha256": digest}
