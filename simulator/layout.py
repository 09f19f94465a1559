"""Static graph arrays derived from a trace: storages, and tensors' storages and neighbours.

Few, dense arrays on purpose: the compiled kernel pays a reference-count update per array
each time it passes one to a function, so per-entity fields are rows of one 2-D array and
every variable-length list lives in one flat array (`flat`) addressed by pointer rows.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from simulator.trace import Trace

# ops[row, op], pointer rows have one more column: flat[ops[ROW, op] : ops[ROW, op + 1]]
OP_COST, OP_TOTAL, OP_OUT, OP_ARGS, OP_FWD_GROWTH, OP_REV_GROWTH = range(6)
# tens[row, tensor]
T_OP, T_SIZE, T_STORAGE, T_GAIN = range(4)
# stor[row, storage], pointer rows have one more column
S_SIZE, S_ROOT, S_TENSORS, S_FWD, S_REV = range(5)

Layout = namedtuple("Layout", ["ops", "tens", "stor", "flat", "cmds"])
"""ops / tens / stor: int64 rows above; flat: int32 lists; cmds: int64[2, commands] kind, arg.

Lists in `flat`: each operator's arguments (tensor ids, repeats kept); each storage's tensors
in creation order; each storage's forward (children's storages) and reverse (parents'
storages) neighbours, each once, never itself, in order of creation; and per operator the
storages whose forward / reverse lists grow by one entry when it is created.
"""


def _link(adjacency: list[list[int]], grown: list[int], a: int, b: int) -> None:
    """Record b as a neighbour of a, once; regions and classes only ever ask which storages."""
    if a != b and b not in adjacency[a]:
        adjacency[a].append(b)
        grown.append(a)


class _Flat:
    """Concatenates lists into one array and returns their pointer rows."""

    def __init__(self) -> None:
        self.parts: list[list[int]] = []
        self.size = 0

    def add(self, groups: list[list[int]]) -> np.ndarray:
        ptr = np.zeros(len(groups) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(g) for g in groups])
        ptr += self.size
        for g in groups:
            self.parts.append(g)
        self.size = int(ptr[-1])
        return ptr

    def array(self) -> np.ndarray:
        return np.array([x for g in self.parts for x in g], dtype=np.int32)


def build_layout(trace: Trace) -> Layout:
    """Derive the arrays the replay kernel walks, each list in order of creation."""
    n_ops, n_tensors = trace.n_ops, trace.n_tensors
    out_ptr, arg_ptr, args = trace.op_out_ptr, trace.op_arg_ptr, trace.op_args
    t_storage = np.empty(n_tensors, dtype=np.int64)
    gain = np.zeros(n_tensors, dtype=np.int64)
    roots: list[int] = []
    members: list[list[int]] = []
    fwd: list[list[int]] = []
    rev: list[list[int]] = []
    op_fwd: list[list[int]] = []
    op_rev: list[list[int]] = []
    for op in range(n_ops):
        outputs = range(out_ptr[op], out_ptr[op + 1])
        touched = set()
        for t in outputs:
            alias = trace.tensor_alias[t]
            if alias < 0:
                t_storage[t] = len(roots)
                roots.append(t)
                members.append([])
                fwd.append([])
                rev.append([])
            else:
                t_storage[t] = t_storage[args[arg_ptr[op] + alias]]
            members[t_storage[t]].append(t)
            # A storage's compute counts each distinct operator among its tensors once.
            if t_storage[t] not in touched:
                gain[t] = trace.op_cost[op]
                touched.add(t_storage[t])
        op_fwd.append([])
        op_rev.append([])
        for t in outputs:
            for p in args[arg_ptr[op] : arg_ptr[op + 1]]:
                _link(fwd, op_fwd[-1], t_storage[p], t_storage[t])
                _link(rev, op_rev[-1], t_storage[t], t_storage[p])
    flat = _Flat()
    arg_rows = flat.add([args[arg_ptr[i] : arg_ptr[i + 1]].tolist() for i in range(n_ops)])
    s_size = trace.tensor_size[np.array(roots, dtype=np.int64)] if roots else np.zeros(0, np.int64)
    stor = np.zeros((5, len(roots) + 1), dtype=np.int64)
    stor[S_SIZE, :-1] = s_size
    stor[S_ROOT, :-1] = roots
    stor[S_TENSORS] = flat.add(members)
    stor[S_FWD] = flat.add(fwd)
    stor[S_REV] = flat.add(rev)
    size_prefix = np.concatenate(([0], np.cumsum(trace.tensor_size, dtype=np.int64)))
    ops = np.zeros((6, n_ops + 1), dtype=np.int64)
    ops[OP_COST, :-1] = trace.op_cost
    ops[OP_TOTAL, :-1] = size_prefix[out_ptr[1:]] - size_prefix[out_ptr[:-1]]
    ops[OP_OUT] = out_ptr
    ops[OP_ARGS] = arg_rows
    ops[OP_FWD_GROWTH] = flat.add(op_fwd)
    ops[OP_REV_GROWTH] = flat.add(op_rev)
    tens = np.zeros((4, n_tensors), dtype=np.int64)
    tens[T_OP] = np.repeat(np.arange(n_ops), np.diff(out_ptr))
    tens[T_SIZE] = trace.tensor_size
    tens[T_STORAGE] = t_storage
    tens[T_GAIN] = gain
    cmds = np.stack([trace.cmd_kind.astype(np.int64), trace.cmd_arg.astype(np.int64)])
    return Layout(ops=ops, tens=tens, stor=stor, flat=flat.array(), cmds=cmds)
