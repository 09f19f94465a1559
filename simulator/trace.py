"""Reading simrd's JSON-lines training traces into the replay schedule simrd derives from them."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import TraceError

COMPUTE, GET, PIN, RELEASE = 0, 1, 2, 3
"""Schedule commands: run an operator, take a reference, pin (rematerializing first), drop one."""

CALL_OP, CONSTANT_OP, MUTATE_OP = 0, 1, 2
"""Operator kinds, as the trace produced them."""


@dataclass(frozen=True, eq=False)
class Trace:
    """A trace compiled to arrays: operators, their output tensors, and the replay schedule.

    Tensors are numbered in creation order; operator ``i`` creates tensors
    ``op_out_ptr[i] .. op_out_ptr[i + 1] - 1`` from arguments
    ``op_args[op_arg_ptr[i] : op_arg_ptr[i + 1]]`` (tensor ids, repeats kept).
    """

    name: str
    sha256: str
    op_kind: np.ndarray  # int8, CALL_OP / CONSTANT_OP / MUTATE_OP
    op_cost: np.ndarray  # int64
    op_line: np.ndarray  # int32, 1-based line of the instruction in the source
    op_out_ptr: np.ndarray  # int32, n_ops + 1
    op_arg_ptr: np.ndarray  # int32, n_ops + 1
    op_args: np.ndarray  # int32
    tensor_size: np.ndarray  # int64, bytes this output allocates (0 for an alias)
    tensor_alias: np.ndarray  # int32, argument position the output aliases, or -1
    tensor_names: tuple[str, ...]
    cmd_kind: np.ndarray  # int8, COMPUTE / GET / PIN / RELEASE
    cmd_arg: np.ndarray  # int32, operator index for COMPUTE, tensor id otherwise
    cmd_line: np.ndarray  # int32, 1-based source line the command comes from

    @property
    def n_ops(self) -> int:
        return len(self.op_cost)

    @property
    def n_tensors(self) -> int:
        return len(self.tensor_size)

    @property
    def model_compute(self) -> int:
        """Total operator cost of one replay (each operator runs once when nothing is evicted)."""
        return int(self.op_cost.sum())


class _Lines:
    """Numbered instructions of one source, consumed front to back."""

    def __init__(self, source: str, texts: list[str]):
        self.source = source
        self.texts = texts
        self.pos = 0

    def error(self, line: int, expected: str, found: str) -> TraceError:
        return TraceError(self.source, line, expected, found)

    def next(self, expected: str, after: int) -> tuple[int, dict]:
        if self.pos >= len(self.texts):
            raise self.error(after + 1, expected, "end of file (truncated trace?)")
        self.pos += 1
        return self.pos, self.decode(self.pos)

    def decode(self, line: int) -> dict:
        text = self.texts[line - 1]
        if not text.strip():  # simrd's parser rejects it too (json.loads of an empty line)
            raise self.error(line, "a JSON object", "a blank line")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.error(line, "a JSON object", f"invalid JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("INSTRUCTION"), str):
            raise self.error(line, "a JSON object with an INSTRUCTION field", repr(text[:60]))
        return obj


_FIELDS = {
    "CONSTANT": ("NAME",),
    "MEMORY": ("NAME", "MEMORY"),
    "COPY": ("DST", "SRC"),
    "COPY_FROM": ("DST", "SRC"),
    "RELEASE": ("NAME",),
    "CALL": ("RESULT", "NAME", "ARGS", "TIME"),
    "MUTATE": ("NAME", "ARGS", "MUTATE", "TIME"),
    "ANNOTATE": ("ANNOTATION",),
    "ALIAS": ("NAME", "ALIAS"),
}


class _Builder:
    """Accumulates operators, tensors and schedule commands as simrd's parser would create them."""

    def __init__(self, lines: _Lines):
        self.lines = lines
        self.names: dict[str, int] = {}  # trace name -> tensor id, in first-definition order
        self.refs: list[int] = []  # per tensor: names currently bound to it (simrd's `_ref`)
        self.storage_size: list[int] = []  # per tensor: bytes of the storage it lives in
        self.tensor_names: list[str] = []
        self.graph_names: set[str] = set()
        self.tensor_size: list[int] = []
        self.tensor_alias: list[int] = []
        self.op_kind: list[int] = []
        self.op_cost: list[int] = []
        self.op_line: list[int] = []
        self.op_out_ptr = [0]
        self.op_arg_ptr = [0]
        self.op_args: list[int] = []
        self.cmds: list[tuple[int, int, int]] = []  # (kind, argument, source line)

    def lookup(self, name: object, line: int) -> int:
        if not isinstance(name, str) or name not in self.names:
            raise self.lines.error(line, "a tensor defined earlier in the trace", repr(name))
        return self.names[name]

    def add_op(self, kind: int, cost: int, line: int, args: list[int], outputs) -> list[int]:
        """Register an operator; `outputs` is a list of (graph name, size, alias position)."""
        first = len(self.tensor_size)
        for name, size, alias in outputs:
            if name in self.graph_names:
                raise self.lines.error(line, "a result name not used before", repr(name))
            self.graph_names.add(name)
            self.tensor_names.append(name)
            self.tensor_size.append(size)
            self.tensor_alias.append(alias)
            self.storage_size.append(size if alias < 0 else self.storage_size[args[alias]])
            self.refs.append(0)
        self.op_kind.append(kind)
        self.op_cost.append(cost)
        self.op_line.append(line)
        self.op_args.extend(args)
        self.op_arg_ptr.append(len(self.op_args))
        self.op_out_ptr.append(len(self.tensor_size))
        self.cmds.append((COMPUTE, len(self.op_cost) - 1, line))
        return list(range(first, len(self.tensor_size)))

    def bind(self, name: str, tensor: int) -> None:
        self.names[name] = tensor
        self.refs[tensor] += 1

    def rebind(self, name: str, tensor: int, line: int) -> None:
        """Point an existing name at another tensor, releasing the old one (keeps name order)."""
        old = self.names[name]
        self.refs[old] -= 1
        self.cmds.append((RELEASE, old, line))
        self.names[name] = tensor
        self.refs[tensor] += 1


_INT_LIMIT = 2**62  # sizes and costs are summed in int64 arrays


def _int_field(lines: _Lines, line: int, obj: dict, key: str, low: int = 0) -> int:
    value = obj[key]
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or not low <= number < _INT_LIMIT:
        raise lines.error(line, f"an integer {key} from {low} to 2**62 - 1", repr(value))
    return number


def _name(lines: _Lines, line: int, obj: dict, key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise lines.error(line, f"a string {key}", repr(value))
    return value


def _check_fields(lines: _Lines, line: int, obj: dict) -> str:
    instr = obj["INSTRUCTION"]
    if instr not in _FIELDS:
        raise lines.error(line, "a known instruction (" + ", ".join(_FIELDS) + ")", repr(instr))
    missing = [key for key in _FIELDS[instr] if key not in obj]
    if missing:
        raise lines.error(
            line, f"{instr} with field(s) {', '.join(_FIELDS[instr])}", f"no {missing[0]}"
        )
    return instr


def _expect(lines: _Lines, b: _Builder, kind: str, name: str, after: int) -> tuple[int, dict]:
    line, obj = lines.next(f"{kind} for {name!r}", after)
    instr = _check_fields(lines, line, obj)
    if instr != kind or _name(lines, line, obj, "NAME") != name:
        raise lines.error(line, f"{kind} for {name!r}", f"{instr} {obj.get('NAME')!r}")
    return line, obj


def _constant(lines: _Lines, b: _Builder, line: int, obj: dict) -> None:
    name = _name(lines, line, obj, "NAME")
    mline, memory = _expect(lines, b, "MEMORY", name, line)
    size = _int_field(lines, mline, memory, "MEMORY")
    (tensor,) = b.add_op(CONSTANT_OP, 0, line, [], [(name, size, -1)])
    b.cmds.append((PIN, tensor, line))
    b.names[name] = tensor
    b.refs[tensor] = 1


def _call(lines: _Lines, b: _Builder, line: int, obj: dict) -> None:
    results, args = obj["RESULT"], obj["ARGS"]
    if not isinstance(args, list) or not (
        isinstance(results, list) and all(isinstance(r, str) for r in results)
    ):
        raise lines.error(line, "CALL with a list ARGS and a list of names RESULT", repr(results))
    arg_ids = [b.lookup(a, line) for a in args]
    cost = _int_field(lines, line, obj, "TIME")
    outputs, last = [], line
    for name in results:
        mline, memory = _expect(lines, b, "MEMORY", name, last)
        last, alias_obj = _expect(lines, b, "ALIAS", name, mline)
        alias = _int_field(lines, last, alias_obj, "ALIAS", low=-_INT_LIMIT)
        if not -1 <= alias < len(args):
            raise lines.error(last, f"an ALIAS from -1 to {len(args) - 1}", str(alias))
        size = 0 if alias != -1 else _int_field(lines, mline, memory, "MEMORY")
        if name in b.names:
            raise lines.error(line, "CALL results not defined before", repr(name))
        outputs.append((name, size, alias))
    for name, tensor in zip(results, b.add_op(CALL_OP, cost, line, arg_ids, outputs), strict=True):
        b.bind(name, tensor)


def _mutate(lines: _Lines, b: _Builder, line: int, obj: dict) -> None:
    args, mutated = obj["ARGS"], obj["MUTATE"]
    if not isinstance(args, list) or not isinstance(mutated, list):
        raise lines.error(line, "MUTATE with list ARGS and MUTATE", f"{args!r}, {mutated!r}")
    arg_ids = [b.lookup(a, line) for a in args]
    if any(not isinstance(m, int) or not 0 <= m < len(args) for m in mutated):
        raise lines.error(line, f"MUTATE positions from 0 to {len(args) - 1}", repr(mutated))
    cost = _int_field(lines, line, obj, "TIME")
    outputs = [(b.tensor_names[arg_ids[m]] + "$", b.storage_size[arg_ids[m]], -1) for m in mutated]
    new = b.add_op(MUTATE_OP, cost, line, arg_ids, outputs)
    for m, tensor in zip(mutated, new, strict=True):
        b.rebind(args[m], tensor, line)


def _copy(lines: _Lines, b: _Builder, line: int, obj: dict) -> None:
    src = b.lookup(obj["SRC"], line)
    dst = _name(lines, line, obj, "DST")
    if dst in b.names:
        raise lines.error(line, "a COPY destination not defined before", repr(dst))
    b.bind(dst, src)
    b.cmds.append((GET, src, line))


def _copy_from(lines: _Lines, b: _Builder, line: int, obj: dict) -> None:
    b.lookup(obj["DST"], line)
    src = b.lookup(obj["SRC"], line)
    b.rebind(obj["DST"], src, line)
    b.cmds.append((GET, src, line))


def _release(lines: _Lines, b: _Builder, line: int, obj: dict) -> None:
    # simrd ignores releases of names it never saw (ignore_undefined_release=True).
    tensor = b.names.get(_name(lines, line, obj, "NAME"))
    if tensor is not None:
        b.refs[tensor] -= 1
        b.cmds.append((RELEASE, tensor, line))


_HANDLERS = {
    "CONSTANT": _constant,
    "CALL": _call,
    "MUTATE": _mutate,
    "COPY": _copy,
    "COPY_FROM": _copy_from,
    "RELEASE": _release,
    "ANNOTATE": lambda lines, b, line, obj: None,
}


def _skip_to_start(lines: _Lines) -> None:
    while lines.pos < len(lines.texts):
        line, obj = lines.next("an ANNOTATE START line", lines.pos)
        if _check_fields(lines, line, obj) == "ANNOTATE" and obj["ANNOTATION"] == "START":
            return
    raise lines.error(max(len(lines.texts), 1), "an ANNOTATE START line", "none in the whole file")


def _check_refcounts(lines: _Lines, b: _Builder) -> None:
    """Reject schedules that take or drop a reference on a storage nobody holds (simrd asserts)."""
    owner: list[int] = []  # per tensor: the tensor whose storage it lives in
    for op in range(len(b.op_cost)):
        for t in range(b.op_out_ptr[op], b.op_out_ptr[op + 1]):
            alias = b.tensor_alias[t]
            owner.append(t if alias < 0 else owner[b.op_args[b.op_arg_ptr[op] + alias]])
    held = [0] * len(owner)
    for kind, arg, line in b.cmds:
        if kind == COMPUTE:
            for t in range(b.op_out_ptr[arg], b.op_out_ptr[arg + 1]):
                held[owner[t]] += 1
        elif kind in (GET, RELEASE):
            if held[owner[arg]] <= 0:
                raise lines.error(
                    line, "a tensor that is still referenced", repr(b.tensor_names[arg])
                )
            held[owner[arg]] += 1 if kind == GET else -1


def _finish(b: _Builder, name: str, sha256: str) -> Trace:
    # Outputs: every name still holding a reference is rematerialized and pinned, in name order.
    end = len(b.lines.texts)
    for tensor in b.names.values():
        if b.refs[tensor] > 0:
            b.cmds.append((PIN, tensor, end))
    kinds, args, cmd_lines = zip(*b.cmds, strict=True) if b.cmds else ((), (), ())
    return Trace(
        name=name,
        sha256=sha256,
        op_kind=np.array(b.op_kind, dtype=np.int8),
        op_cost=np.array(b.op_cost, dtype=np.int64),
        op_line=np.array(b.op_line, dtype=np.int32),
        op_out_ptr=np.array(b.op_out_ptr, dtype=np.int32),
        op_arg_ptr=np.array(b.op_arg_ptr, dtype=np.int32),
        op_args=np.array(b.op_args, dtype=np.int32),
        tensor_size=np.array(b.tensor_size, dtype=np.int64),
        tensor_alias=np.array(b.tensor_alias, dtype=np.int32),
        tensor_names=tuple(b.tensor_names),
        cmd_kind=np.array(kinds, dtype=np.int8),
        cmd_arg=np.array(args, dtype=np.int32),
        cmd_line=np.array(cmd_lines, dtype=np.int32),
    )


def parse_trace(data: bytes, source: str, name: str | None = None) -> Trace:
    """Parse a trace's bytes as simrd's `parse_file(f, start=True)` + `get_closure()` replay it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(
            source, line, "UTF-8 text", f"undecodable byte at offset {exc.start}"
        ) from None
    # Lines as simrd's text-mode file iteration yields them (universal newlines).
    texts = io.StringIO(text, newline=None).read().split("\n")
    if texts and texts[-1] == "":
        texts.pop()
    if not any(t.strip() for t in texts):
        raise TraceError(source, 1, "trace instructions", "an empty file")
    lines = _Lines(source, texts)
    _skip_to_start(lines)
    b = _Builder(lines)
    while lines.pos < len(texts):
        line, obj = lines.next("an instruction", lines.pos)
        instr = _check_fields(lines, line, obj)
        handler = _HANDLERS.get(instr)
        if handler is None:
            raise lines.error(
                line, "CONSTANT, CALL, MUTATE, COPY, COPY_FROM, RELEASE or ANNOTATE", instr
            )
        handler(lines, b, line, obj)
    if all(kind == CONSTANT_OP for kind in b.op_kind):  # simrd would "complete" it at budget 0
        raise lines.error(len(texts), "an operator (CALL or MUTATE) after ANNOTATE START", "none")
    _check_refcounts(lines, b)
    return _finish(b, name or Path(source).stem, hashlib.sha256(data).hexdigest())


def provenance(data: bytes) -> dict | None:
    """What the trace's first line, an `ANNOTATE PROVENANCE` before START, says of its origin
    (the tracer, the cost model, a cost perturbation), or None: DTR's own traces have none."""
    first = data.split(b"\n", 1)[0]
    try:
        obj = json.loads(first)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if isinstance(obj, dict) and obj.get("ANNOTATION") == "PROVENANCE":
        given = obj.get("PROVENANCE")
        return given if isinstance(given, dict) else None
    return None


def file_bytes(path: str | Path) -> bytes:
    """A trace file's bytes; TraceError naming the file if it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(str(path), 0, "a readable trace file", exc.strerror or str(exc)) from None


def member_bytes(archive: str | Path, member: str) -> bytes:
    """An archive member's bytes; TraceError naming archive and member if it cannot be read."""
    try:
        with zipfile.ZipFile(archive) as zf:
            return zf.read(member)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise TraceError(f"{archive}:{member}", 0, "a readable archive member", str(exc)) from None


def read_trace(path: str | Path, name: str | None = None) -> Trace:
    """Parse a `.log` trace file."""
    return parse_trace(file_bytes(path), str(path), name)


def read_archive_member(archive: str | Path, member: str, name: str | None = None) -> Trace:
    """Parse one member of a trace archive (such as simrd's `logs.zip`) without unpacking it."""
    return parse_trace(member_bytes(archive, member), f"{archive}:{member}", name)
