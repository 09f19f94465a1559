"""Traces whose operator costs are perturbed (`dtr-holes recost`): the cost-noise study's input.

Only the TIME of each CALL and MUTATE changes; every other field of the trace's instructions is
kept (the lines it rewrites are written compactly, keys sorted, as DTR's are), so memory,
aliasing and the schedule are the original's and budgets mean the same bytes (the peak is
unchanged). A recipe names a perturbation in one word, as the trace sheet's `file`
column writes it after `recost:<base trace>:`:

- `lognormal:<sigma>:<seed>`: each cost times exp(sigma * z), z standard normal, drawn in
  operator order by numpy's PCG64 seeded with `seed` (median factor 1), rounded half to even;
- `uniform`: every operator costs the trace's mean cost (rounded), so only the graph matters;
- `size`: every operator costs the bytes its outputs allocate (a MUTATE: the storages it
  writes), at least 1: cost proportional to memory traffic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from simulator import UserError
from simulator.trace import CALL_OP, MUTATE_OP, Trace, parse_trace, provenance

_RECIPE = re.compile(r"lognormal:(?P<sigma>\d+(?:\.\d+)?):(?P<seed>\d+)|uniform|size")


@dataclass(frozen=True)
class Recipe:
    """A cost perturbation: `kind` lognormal (with sigma and seed), uniform or size."""

    kind: str
    sigma: float = 0.0
    seed: int = 0

    @classmethod
    def parse(cls, text: str, where: str = "recipe") -> Recipe:
        match = _RECIPE.fullmatch(text)
        if match is None:
            raise UserError(where, "lognormal:<sigma>:<seed>, uniform or size", repr(text))
        if match["sigma"] is None:
            return cls(text)
        return cls("lognormal", float(match["sigma"]), int(match["seed"]))

    def __str__(self) -> str:
        if self.kind != "lognormal":
            return self.kind
        return f"lognormal:{self.sigma:g}:{self.seed}"

    def costs(self, trace: Trace) -> np.ndarray:
        """The new cost of every operator (constants keep 0)."""
        timed = (trace.op_kind == CALL_OP) | (trace.op_kind == MUTATE_OP)
        old = trace.op_cost.astype(np.float64)
        if self.kind == "lognormal":
            draws = np.random.Generator(np.random.PCG64(self.seed))
            factors = np.exp(self.sigma * draws.standard_normal(int(timed.sum())))
            new = np.zeros(trace.n_ops)
            new[timed] = old[timed] * factors
        elif self.kind == "uniform":
            new = np.where(timed, old[timed].mean() if timed.any() else 0.0, 0.0)
        else:
            allocated = np.concatenate(([0], np.cumsum(trace.tensor_size)))
            ptr = trace.op_out_ptr
            new = np.where(timed, np.maximum(allocated[ptr[1:]] - allocated[ptr[:-1]], 1), 0)
        return np.rint(new).astype(np.int64)


def recost(data: bytes, source: str, recipe: Recipe) -> bytes:
    """The trace `data` with its operator costs replaced by the recipe's, and a provenance line
    naming the original (its sha256 and provenance) and the recipe."""
    trace = parse_trace(data, source)
    lines = data.decode("utf-8").splitlines()
    original = provenance(data)
    for line, cost in zip(trace.op_line, recipe.costs(trace), strict=True):
        obj = json.loads(lines[line - 1])
        if "TIME" in obj:
            obj["TIME"] = str(int(cost))
            lines[line - 1] = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    header = {"recost": {"from": trace.sha256, "recipe": str(recipe)}}
    if original is not None:
        header["original"] = original
        lines = lines[1:]
    head = {"ANNOTATION": "PROVENANCE", "INSTRUCTION": "ANNOTATE", "PROVENANCE": header}
    text = [json.dumps(head, sort_keys=True, separators=(",", ":")), *lines]
    return ("\n".join(text) + "\n").encode()
