"""Files are written whole or not at all, and as readable as the umask allows (a temporary
file starts 0600: a colleague on a shared file system could not read the results)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pyarrow as pa
import pytest

from dtrholes.core import files
from dtrholes.study import records
from dtrholes.traces import fetch
from simulator import store
from tests.support.archive import archive_source
from tests.support.records import record_for
from tests.support.tracegen import random_trace_text, tiny_trace


@pytest.fixture
def umask_027():
    previous = os.umask(0o027)
    yield 0o640
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_writer_gives_the_umasks_mode(tmp_path: Path, umask_027: int) -> None:
    table = pa.table({"x": [1]})
    files.write_json(tmp_path / "a.json", {"a": 1})
    files.write_table(table, tmp_path / "a.parquet")
    store.save_trace(tiny_trace(random_trace_text(1, 4)), tmp_path / "trace.parquet")
    written = [tmp_path / "a.json", tmp_path / "a.parquet", tmp_path / "trace.parquet"]
    written.append(records.write_record(record_for(150), tmp_path / "records"))
    written.append(fetch.fetch_archive(tmp_path / "data", archive_source()))
    assert [mode(p) for p in written] == [umask_027] * len(written)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    files.write_json(target, [1])
    with pytest.raises(RuntimeError), files.atomic(target) as tmp:
        tmp.write_text("[2")
        raise RuntimeError("interrupted")
    assert target.read_text() == "[\n 1\n]\n" and os.listdir(tmp_path) == ["a.json"]
