"""Storing a compiled Trace as one single-row Parquet file with an explicit schema."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from simulator import trace as trace_module
from simulator.errors import TraceError
from simulator.trace import Trace

FORMAT_VERSION = "1"
"""Bumped whenever the schema below changes; files of another version are rejected."""

VERSION_KEY = b"dtr_holes.trace_format"
COMPILER_KEY = b"dtr_holes.trace_compiler"

_ARRAYS: dict[str, tuple[pa.DataType, type[np.integer]]] = {
    "op_kind": (pa.int8(), np.int8),
    "op_cost": (pa.int64(), np.int64),
    "op_line": (pa.int32(), np.int32),
    "op_out_ptr": (pa.int32(), np.int32),
    "op_arg_ptr": (pa.int32(), np.int32),
    "op_args": (pa.int32(), np.int32),
    "tensor_size": (pa.int64(), np.int64),
    "tensor_alias": (pa.int32(), np.int32),
    "cmd_kind": (pa.int8(), np.int8),
    "cmd_arg": (pa.int32(), np.int32),
    "cmd_line": (pa.int32(), np.int32),
}
"""Every numpy field of Trace: its Arrow element type and the dtype it is loaded back as."""


def _list(item: pa.DataType) -> pa.DataType:
    # Parquet's compliant nested type names the item "element"; use it so schemas compare equal.
    return pa.list_(pa.field("element", item))


_COLUMNS = [
    pa.field("name", pa.string(), nullable=False),
    pa.field("sha256", pa.string(), nullable=False),
    pa.field("tensor_names", _list(pa.string()), nullable=False),
    *(pa.field(key, _list(t), nullable=False) for key, (t, _) in _ARRAYS.items()),
]


def compiler_fingerprint() -> str:
    """Hash of simulator/trace.py: a compiled trace is stale once the compiler changes."""
    return hashlib.sha256(Path(trace_module.__file__).read_bytes()).hexdigest()


def schema() -> pa.Schema:
    """The Parquet schema of a stored trace; its metadata holds the format and compiler versions."""
    metadata = {VERSION_KEY: FORMAT_VERSION.encode(), COMPILER_KEY: compiler_fingerprint().encode()}
    return pa.schema(_COLUMNS, metadata=metadata)


def _to_table(trace: Trace) -> pa.Table:
    columns = {
        "name": pa.array([trace.name], pa.string()),
        "sha256": pa.array([trace.sha256], pa.string()),
        "tensor_names": pa.array([list(trace.tensor_names)], _list(pa.string())),
    }
    for key, (arrow_type, dtype) in _ARRAYS.items():
        # A safe cast only: an int64 array silently wrapped into int32 would corrupt the trace.
        values = np.asarray(getattr(trace, key)).astype(dtype, casting="safe", copy=False)
        offsets = pa.array([0, len(values)], pa.int32())
        items = pa.array(values, arrow_type)
        columns[key] = pa.ListArray.from_arrays(offsets, items, _list(arrow_type))
    return pa.Table.from_pydict(columns, schema=schema())


def save_trace(trace: Trace, path: str | Path) -> None:
    """Write `trace` to `path` atomically."""
    _write_table(_to_table(trace), path)


def _write_table(table: pa.Table, path: str | Path) -> None:
    """Write a Parquet table atomically: a temporary file beside `path`, then a rename. The
    temporary file is created 0600; the table gets the mode the umask gives a new file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except FileNotFoundError:
        raise TraceError(str(path), 0, "a compiled trace file", "no such file") from None
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(str(path), 0, "a Parquet file of a compiled trace", str(exc)) from None


def _check_layout(path: Path, table: pa.Table) -> None:
    metadata = table.schema.metadata or {}
    version = metadata.get(VERSION_KEY, b"none").decode(errors="replace")
    if version != FORMAT_VERSION:
        raise TraceError(str(path), 0, f"trace format version {FORMAT_VERSION}", version)
    expected = schema()
    if not table.schema.equals(expected, check_metadata=False):
        raise TraceError(str(path), 0, f"columns {expected.names}", f"{table.schema.names}")
    if table.num_rows != 1:
        raise TraceError(str(path), 0, "exactly one row", f"{table.num_rows} rows")


def _values(path: Path, table: pa.Table, key: str) -> pa.Array:
    column = table.column(key).combine_chunks()
    if column.null_count or column.flatten().null_count:
        raise TraceError(str(path), 0, f"no missing values in {key}", "nulls")
    return column.flatten()


def load_trace_file(path: str | Path) -> Trace:
    """Read a trace written by `save_trace`; any unreadable or foreign file raises TraceError."""
    path = Path(path)
    table = _read(path)
    _check_layout(path, table)
    fields = {
        "name": table.column("name")[0].as_py(),
        "sha256": table.column("sha256")[0].as_py(),
        "tensor_names": tuple(_values(path, table, "tensor_names").to_pylist()),
    }
    for key, (_, dtype) in _ARRAYS.items():
        fields[key] = np.array(_values(path, table, key).to_numpy(zero_copy_only=False), dtype)
    return Trace(**fields)


def is_current(path: str | Path, sha256: str | None = None) -> bool:
    """True if `path` looks like a trace of this format and compiler (and of source `sha256`).

    A cheap check of the file's footer and one column; `load_trace_file` still validates it all.
    """
    try:
        with pq.ParquetFile(path) as f:
            # Comparing the metadata too compares the format version and the compiler fingerprint.
            if f.metadata.num_rows != 1 or not f.schema_arrow.equals(schema(), check_metadata=True):
                return False
            stored = f.read(columns=["sha256"]).column(0)[0].as_py()
            return sha256 is None or stored == sha256
    except (OSError, pa.ArrowException):
        return False


def stored_fields() -> frozenset[str]:
    """The Trace fields this format stores (a test compares them with the dataclass's fields)."""
    return frozenset(f.name for f in _COLUMNS)
