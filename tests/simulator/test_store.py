"""Storing compiled traces as Parquet: exact round trips and clear errors for damaged files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simulator import store
from simulator.errors import TraceError
from simulator.trace import Trace, read_archive_member
from tests.support.archive import read_sheet


def tiny_trace(n_cmds: int = 3) -> Trace:
    """Two operators (a constant and a call on it); costs beyond 32 bits to catch truncation."""
    return Trace(
        name="tiny",
        sha256="0" * 64,
        op_kind=np.array([1, 0], np.int8),
        op_cost=np.array([0, 2**40 + 3], np.int64),
        op_line=np.array([2, 4], np.int32),
        op_out_ptr=np.array([0, 1, 2], np.int32),
        op_arg_ptr=np.array([0, 0, 1], np.int32),
        op_args=np.array([0], np.int32),
        tensor_size=np.array([2**33, 0], np.int64),
        tensor_alias=np.array([-1, 0], np.int32),
        tensor_names=("x", "y"),
        cmd_kind=np.array([0, 2, 0][:n_cmds], np.int8),
        cmd_arg=np.array([0, 0, 1][:n_cmds], np.int32),
        cmd_line=np.array([2, 2, 4][:n_cmds], np.int32),
    )


def empty_trace() -> Trace:
    ints = {f.name: np.array([], np.int32) for f in dataclasses.fields(Trace)}
    ints |= {"op_kind": np.array([], np.int8), "cmd_kind": np.array([], np.int8)}
    ints |= {"op_cost": np.array([], np.int64), "tensor_size": np.array([], np.int64)}
    ints |= {"op_out_ptr": np.array([0], np.int32), "op_arg_ptr": np.array([0], np.int32)}
    return Trace(**ints | {"name": "empty", "sha256": "1" * 64, "tensor_names": ()})


def test_format_stores_every_trace_field() -> None:
    assert store.stored_fields() == {f.name for f in dataclasses.fields(Trace)}


@pytest.mark.parametrize("make", [tiny_trace, empty_trace])
def test_small_traces_round_trip(tmp_path: Path, make, assert_same_trace) -> None:
    trace = make()
    path = tmp_path / "sub" / "t.parquet"
    store.save_trace(trace, path)
    assert_same_trace(trace, store.load_trace_file(path))
    assert list(path.parent.glob(".*.part")) == []


@pytest.mark.parametrize("entry", read_sheet(), ids=lambda e: e.name)
def test_real_traces_round_trip(tmp_path: Path, archive: Path, entry, assert_same_trace) -> None:
    trace = read_archive_member(archive, entry.member, entry.name)
    path = tmp_path / f"{entry.name}.parquet"
    store.save_trace(trace, path)
    assert_same_trace(trace, store.load_trace_file(path))
    assert store.is_current(path, entry.sha256)


def test_file_has_the_explicit_schema_and_version(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    store.save_trace(tiny_trace(), path)
    stored = pq.read_schema(path)
    assert stored.equals(store.schema(), check_metadata=True)
    assert stored.metadata[store.VERSION_KEY] == store.FORMAT_VERSION.encode()
    assert pq.read_metadata(path).num_rows == 1


def test_lossy_dtype_is_refused(tmp_path: Path) -> None:
    trace = dataclasses.replace(tiny_trace(), op_args=np.array([2**40], np.int64))
    with pytest.raises(TypeError):
        store.save_trace(trace, tmp_path / "t.parquet")
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_the_old_file(tmp_path: Path, assert_same_trace) -> None:
    path = tmp_path / "t.parquet"
    store.save_trace(tiny_trace(), path)
    store.save_trace(tiny_trace(n_cmds=1), path)
    assert_same_trace(tiny_trace(n_cmds=1), store.load_trace_file(path))


def write_garbage(path: Path) -> None:
    path.write_bytes(b"PAR1 this is not parquet")


def write_truncated(path: Path) -> None:
    store.save_trace(tiny_trace(), path)
    path.write_bytes(path.read_bytes()[:-40])


def write_foreign(path: Path) -> None:
    pq.write_table(pa.table({"a": [1, 2]}), path)


def write_other_version(path: Path) -> None:
    table = store._to_table(tiny_trace())
    metadata = {**table.schema.metadata, store.VERSION_KEY: b"0"}
    pq.write_table(table.replace_schema_metadata(metadata), path)


def write_two_rows(path: Path) -> None:
    table = store._to_table(tiny_trace())
    pq.write_table(pa.concat_tables([table, table]), path)


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (write_garbage, "Parquet"),
        (write_truncated, "Parquet"),
        (write_foreign, "trace format version"),
        (write_other_version, "trace format version 1, found 0"),
        (write_two_rows, "one row"),
    ],
)
def test_damaged_file_is_a_trace_error_naming_it(tmp_path: Path, damage, fragment) -> None:
    path = tmp_path / "t.parquet"
    damage(path)
    with pytest.raises(TraceError, match=fragment) as caught:
        store.load_trace_file(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert not store.is_current(path)


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        store.load_trace_file(tmp_path / "absent.parquet")
