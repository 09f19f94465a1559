"""Static graph arrays derived from a trace: storages, and tensors' storages and children."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from simulator.trace import Trace

Layout = namedtuple(
    "Layout",
    [
        "op_cost",  # int64[ops]
        "op_total",  # int64[ops]: bytes an operator allocates (sum of its outputs)
        "op_out_ptr",  # int32[ops + 1]
        "op_arg_ptr",  # int32[ops + 1]
        "op_args",  # int32[args]
        "t_op",  # int32[tensors]
        "t_size",  # int64[tensors]
        "t_storage",  # int32[tensors]
        "t_compute_gain",  # int64[tensors]: cost its creation adds to its storage's compute
        "s_root",  # int32[storages]: first tensor created on the storage
        "s_size",  # int64[storages]
        "st_ptr",  # int32[storages + 1]: tensors of a storage, in creation order
        "st_list",  # int32
        "fwd_ptr",  # int32[storages + 1]: storages holding a child of one of its tensors
        "fwd_list",  # int32, in order of creation, each neighbour once, never itself
        "rev_ptr",  # int32[storages + 1]: storages holding a parent of one of its tensors
        "rev_list",  # int32, likewise
        "op_fwd_ptr",  # int32[ops + 1]: storages whose forward list grows by one entry each,
        "op_fwd",  # int32        when the operator is created (repeats: grows by more)
        "op_rev_ptr",  # int32[ops + 1]: likewise for reverse lists
        "op_rev",  # int32
        "cmd_kind",  # int8[commands]
        "cmd_arg",  # int32[commands]
    ],
)


def _csr(groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(groups) + 1, dtype=np.int32)
    ptr[1:] = np.cumsum([len(g) for g in groups])
    flat = [x for g in groups for x in g]
    return ptr, np.array(flat, dtype=np.int32)


def _link(adjacency: list[list[int]], grown: list[int], a: int, b: int) -> None:
    """Record b as a neighbour of a, once; regions and classes only ever ask which storages."""
    if a != b and b not in adjacency[a]:
        adjacency[a].append(b)
        grown.append(a)


def build_layout(trace: Trace) -> Layout:
    """Derive the arrays the replay kernel walks, each list in order of creation."""
    n_ops, n_tensors = trace.n_ops, trace.n_tensors
    out_ptr, arg_ptr, args = trace.op_out_ptr, trace.op_arg_ptr, trace.op_args
    t_op = np.repeat(np.arange(n_ops, dtype=np.int32), np.diff(out_ptr))
    t_storage = np.empty(n_tensors, dtype=np.int32)
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
    st_ptr, st_list = _csr(members)
    s_root = np.array(roots, dtype=np.int32)
    size_prefix = np.concatenate(([0], np.cumsum(trace.tensor_size, dtype=np.int64)))
    return Layout(
        op_cost=trace.op_cost,
        op_total=size_prefix[out_ptr[1:]] - size_prefix[out_ptr[:-1]],
        op_out_ptr=out_ptr,
        op_arg_ptr=arg_ptr,
        op_args=args,
        t_op=t_op,
        t_size=trace.tensor_size,
        t_storage=t_storage,
        t_compute_gain=gain,
        s_root=s_root,
        s_size=trace.tensor_size[s_root],
        st_ptr=st_ptr,
        st_list=st_list,
        **dict(zip(("fwd_ptr", "fwd_list"), _csr(fwd), strict=True)),
        **dict(zip(("rev_ptr", "rev_list"), _csr(rev), strict=True)),
        **dict(zip(("op_fwd_ptr", "op_fwd"), _csr(op_fwd), strict=True)),
        **dict(zip(("op_rev_ptr", "op_rev"), _csr(op_rev), strict=True)),
        cmd_kind=trace.cmd_kind,
        cmd_arg=trace.cmd_arg,
    )
