"""Files the project writes: whole or not at all, and as readable as the user's umask allows."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def umask() -> int:
    """The process's umask (reading it means setting it: set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def share(path: str | Path, directory: bool = False) -> None:
    """Give `path` the mode a plain `open` would have: a temporary file is created 0600, which
    a colleague reading the results on a shared file system could not open."""
    os.chmod(path, (0o777 if directory else 0o666) & ~umask())


@contextlib.contextmanager
def atomic(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` to write; renamed onto `path` when the block ends without
    an error, removed otherwise, so `path` never holds a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        share(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, value: object, indent: int | None = 1) -> None:
    """Sorted keys: the same value is the same bytes."""
    write_text(path, json.dumps(value, indent=indent, sort_keys=True) + "\n")


def write_table(table: pa.Table, path: str | Path) -> None:
    with atomic(path) as tmp:
        pq.write_table(table, tmp)
