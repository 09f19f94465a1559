"""Random small but valid simrd JSON-lines traces, for cross-checking simulators."""

from __future__ import annotations

import json
import random

from simulator.trace import Trace, parse_trace


def line(**fields: object) -> str:
    # Same shape as the real logs: sorted keys, no spaces, numbers as strings.
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


class _Writer:
    """Trace lines plus the bookkeeping that keeps every reference valid.

    Without `joins`, an operator takes at most one argument that can be evicted (the others are
    constants, which simrd pins), so the graph of evictable storages is a forest. With joins,
    simrd's incrementally kept regions can go stale while a new operator waits for its
    arguments to be recomputed, and a from-scratch reimplementation may then pick differently.
    """

    def __init__(self, rng: random.Random, joins: bool):
        self.rng = rng
        self.joins = joins
        self.lines = [line(ANNOTATION="START", INSTRUCTION="ANNOTATE")]
        self.live: dict[str, str] = {}  # live name -> graph name of the tensor it is bound to
        self.graph_names: set[str] = set()
        self.pinned: set[str] = set()  # graph names of constants and their aliases
        self.last_outputs: set[str] = set()  # graph names made by the latest operator
        self.counter = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"x{self.counter}"

    def size(self) -> str:
        return str(0 if self.rng.random() < 0.15 else self.rng.randint(1, 100))

    def time(self) -> str:
        return str(0 if self.rng.random() < 0.2 else self.rng.randint(1, 50))

    def bind(self, name: str) -> None:
        self.live[name] = name
        self.graph_names.add(name)

    def constant(self) -> None:
        name = self.fresh()
        self.lines.append(line(INSTRUCTION="CONSTANT", NAME=name))
        self.lines.append(line(INSTRUCTION="MEMORY", MEMORY=self.size(), NAME=name))
        self.bind(name)
        self.pinned.add(name)
        self.last_outputs = {name}

    def pick_args(self) -> list[str]:
        count = self.rng.choice([1, 1, 2, 2, 3])
        if self.joins:
            return self.rng.sample(list(self.live), min(count, len(self.live)))
        evictable = [n for n in self.live if self.live[n] not in self.pinned]
        constants = [n for n in self.live if self.live[n] in self.pinned]
        args = self.rng.sample(evictable, min(1, len(evictable)))
        args += self.rng.sample(constants, min(count - len(args), len(constants)))
        self.rng.shuffle(args)
        return args or [self.rng.choice(list(self.live))]

    def can_alias(self, args: list[str]) -> bool:
        """Views only of one argument that is surely in memory when the view is created.

        simrd adds a view's cost to its storage at creation; were that storage evicted, regions
        holding it would keep the old cost or not depending on history.
        """
        return len(args) == 1 and self.live[args[0]] in self.pinned | self.last_outputs

    def call(self) -> None:
        args = self.pick_args()
        results = [self.fresh() for _ in range(self.rng.choice([1, 1, 1, 2, 3]))]
        self.lines.append(
            line(ARGS=args, INSTRUCTION="CALL", NAME="op", RESULT=results, TIME=self.time())
        )
        aliasable = self.can_alias(args)
        for name in results:
            alias = "0" if aliasable and self.rng.random() < 0.35 else "-1"
            self.lines.append(line(INSTRUCTION="MEMORY", MEMORY=self.size(), NAME=name))
            self.lines.append(line(ALIAS=alias, INSTRUCTION="ALIAS", NAME=name))
            self.bind(name)
            if alias == "0" and self.live[args[0]] in self.pinned:
                self.pinned.add(name)
        self.last_outputs = set(results)

    def mutate(self) -> None:
        args = self.pick_args()
        # simrd names a mutation's result after the old tensor plus "$"; names must stay unique.
        positions, new_names = [], set()
        for i, name in enumerate(args):
            result = self.live[name] + "$"
            unused = result not in self.graph_names and result not in new_names
            if unused and (not positions or self.rng.random() < 0.3):
                positions.append(i)
                new_names.add(result)
        if not positions:
            return self.call()
        self.lines.append(
            line(ARGS=args, INSTRUCTION="MUTATE", MUTATE=positions, NAME="op_", TIME=self.time())
        )
        for i in positions:
            self.live[args[i]] += "$"
        self.graph_names |= new_names
        self.last_outputs = new_names

    def copy(self) -> None:
        src, dst = self.rng.choice(list(self.live)), self.fresh()
        self.lines.append(line(DST=dst, INSTRUCTION="COPY", SRC=src))
        self.live[dst] = self.live[src]

    def copy_from(self) -> None:
        dst, src = self.rng.sample(list(self.live), 2)
        self.lines.append(line(DST=dst, INSTRUCTION="COPY_FROM", SRC=src))
        self.live[dst] = self.live[src]

    def release(self) -> None:
        name = self.rng.choice(list(self.live))
        self.lines.append(line(INSTRUCTION="RELEASE", NAME=name))
        del self.live[name]


def _step(w: _Writer) -> None:
    """One random instruction; CALL dominates, as in real traces."""
    roll = w.rng.random()
    if not w.live or roll < 0.12:
        w.constant()
    elif roll < 0.72:
        w.call()
    elif roll < 0.8:
        w.mutate()
    elif roll < 0.86:
        w.copy()
    elif roll < 0.9 and len(w.live) >= 2:
        w.copy_from()
    elif len(w.live) > 1:
        w.release()


def random_trace_text(seed: int, n_ops: int = 30, *, joins: bool = False) -> str:
    """A valid trace of about `n_ops` instructions; most names are released by the end.

    Keep `joins` off to compare against a from-scratch reimplementation of simrd (see _Writer).
    """
    w = _Writer(random.Random(seed), joins)
    backward_at = w.rng.randrange(n_ops) if w.rng.random() < 0.5 else -1
    for i in range(n_ops):
        if i == backward_at:
            w.lines.append(line(ANNOTATION="BACKWARD", INSTRUCTION="ANNOTATE"))
        _step(w)
    keep = w.rng.randint(1, 3)
    while len(w.live) > keep:
        w.release()
    return "\n".join(w.lines) + "\n"


def tiny_trace(text: str) -> Trace:
    """Parse trace text as the project parser does for a file named `tiny`."""
    return parse_trace(text.encode(), "<test>", "tiny")


def constant(name: str, size: int) -> list[str]:
    """A constant (a weight) of `size` bytes."""
    return [
        line(INSTRUCTION="CONSTANT", NAME=name),
        line(INSTRUCTION="MEMORY", MEMORY=str(size), NAME=name),
    ]


def call(results: str | list[str], args: list[str], time: int, size: int) -> list[str]:
    """One operator; each of its results allocates `size` bytes."""
    names = [results] if isinstance(results, str) else results
    lines = [line(ARGS=args, INSTRUCTION="CALL", NAME="f", RESULT=names, TIME=str(time))]
    for name in names:
        lines.append(line(INSTRUCTION="MEMORY", MEMORY=str(size), NAME=name))
        lines.append(line(ALIAS="-1", INSTRUCTION="ALIAS", NAME=name))
    return lines


def release(*names: str) -> list[str]:
    return [line(INSTRUCTION="RELEASE", NAME=name) for name in names]


def trace_text(*groups: list[str]) -> str:
    """A whole trace: the START annotation, then the groups' lines."""
    start = line(ANNOTATION="START", INSTRUCTION="ANNOTATE")
    return "\n".join([start, *(text for group in groups for text in group)]) + "\n"
