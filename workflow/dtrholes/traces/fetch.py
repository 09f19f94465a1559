"""Fetching DTR's trace archive, reading the trace sheet and loading (cached) compiled traces.

A sheet row's `file` is a member of DTR's archive (`dtr-logs.zip:logs/...log`), a trace file of
your own (a path, relative to the working directory), or a trace generated from another row by
a cost perturbation (`recost:<trace>:<recipe>`, see dtrholes.traces.recost); whichever it is,
its bytes must have the row's sha256.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dtrholes.core import files
from dtrholes.traces import recost
from simulator import store
from simulator.errors import TraceError, UserError
from simulator.trace import Trace, file_bytes, member_bytes, parse_trace, read_trace

ARCHIVE_URL = (
    "https://github.com/uwsampl/dtr-prototype/raw/"
    "eff53cc4804cc7d6246a6e5086861ce2b846f62b/simrd/logs.zip"
)
ARCHIVE_SHA256 = "63579a07a6e7ce063f5ba49450dfb96a9f3995df736c423c27e1336f4365e02a"
ARCHIVE_ENV = "DTR_HOLES_ARCHIVE"
"""Names a local mirror file (or another URL) of the archive to use instead of ARCHIVE_URL."""
DATA_ENV = "DTR_HOLES_DATA"
"""Overrides the data directory (default: the repository's data/)."""
ARCHIVE_NAME = "dtr-logs.zip"
TIMEOUT_S = 60

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SHEET = REPO_ROOT / "config" / "traces.tsv"
SHEET_COLUMNS = ("name", "file", "sha256", "role", "title")
ROLES = ("development", "confirmatory", "own")
"""The study's roles (protocol/PROTOCOL.md), and `own`: a trace outside the protocol, run with
the `own` setting (or when named in `traces`) through the broader sweep's stages."""
ARCHIVE_PREFIX = f"{ARCHIVE_NAME}:"
RECOST_PREFIX = "recost:"


class FetchError(UserError):
    """The trace archive could not be obtained, or a checksum does not match."""


class SheetError(UserError):
    """A trace sheet that is unreadable or has a malformed row."""


@dataclass(frozen=True)
class TraceEntry:
    """One row of the trace sheet."""

    name: str
    file: str
    sha256: str
    role: str
    title: str

    @property
    def member(self) -> str | None:
        """The member of DTR's archive the row names, or None."""
        prefixed = self.file.startswith(ARCHIVE_PREFIX)
        return self.file.removeprefix(ARCHIVE_PREFIX) if prefixed else None

    @property
    def derived(self) -> tuple[str, recost.Recipe] | None:
        """The trace and cost perturbation a generated row derives from, or None."""
        return _recipe(self.file)

    @property
    def path(self) -> Path | None:
        """The trace file of your own the row names, or None."""
        return None if self.member or self.derived else Path(self.file)


def default_data_dir() -> Path:
    """The data directory: $DTR_HOLES_DATA, else the repository's data/."""
    return Path(os.environ.get(DATA_ENV) or REPO_ROOT / "data")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_CELL_CHECKS: dict[str, tuple[Callable[[str], bool], str]] = {
    "name": (lambda v: re.fullmatch(r"[a-z0-9_]+", v) is not None, "a name of [a-z0-9_]"),
    "file": (
        lambda v: _recipe(v) is not None if v.startswith(RECOST_PREFIX) else v.endswith(".log"),
        f"a .log path, {ARCHIVE_PREFIX}<member>.log or {RECOST_PREFIX}<trace>:<recipe>",
    ),
    "sha256": (lambda v: re.fullmatch(r"[0-9a-f]{64}", v) is not None, "64 lowercase hex digits"),
    "role": (lambda v: v in ROLES, "a role among " + ", ".join(ROLES)),
    "title": (lambda v: v != "", "a non-empty title"),
}


def _recipe(value: str) -> tuple[str, recost.Recipe] | None:
    """The base trace and recipe of a `recost:<trace>:<recipe>` cell, None for another cell
    (or a malformed one: the sheet's check refuses it)."""
    base, sep, recipe = value.removeprefix(RECOST_PREFIX).partition(":")
    if not value.startswith(RECOST_PREFIX) or not sep or not _CELL_CHECKS["name"][0](base):
        return None
    try:
        return base, recost.Recipe.parse(recipe)
    except UserError:
        return None


def _parse_row(where: str, text: str) -> TraceEntry:
    cells = [cell.strip() for cell in text.split("\t")]
    if len(cells) != len(SHEET_COLUMNS):
        raise SheetError(where, f"{len(SHEET_COLUMNS)} tab-separated cells", f"{len(cells)}")
    for column, value in zip(SHEET_COLUMNS, cells, strict=True):
        check, expected = _CELL_CHECKS[column]
        if not check(value):
            raise SheetError(where, f"{column}: {expected}", repr(value))
    return TraceEntry(*cells)


def read_sheet(path: str | Path = DEFAULT_SHEET) -> list[TraceEntry]:
    """Read the trace sheet (tab-separated, header `name file sha256 role title`)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SheetError(str(path), "a readable UTF-8 trace sheet", str(exc)) from None
    header = "\t".join(SHEET_COLUMNS)
    if not lines or lines[0].strip() != header:
        raise SheetError(f"{path}:1", f"the header {header!r}", repr(lines[0] if lines else ""))
    entries: dict[str, TraceEntry] = {}
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        entry = _parse_row(f"{path}:{number}", text)
        if entry.name in entries:
            raise SheetError(f"{path}:{number}", "a name not listed before", repr(entry.name))
        if entry.derived and entry.derived[0] not in entries:
            raise SheetError(f"{path}:{number}", "a recost of a trace listed above", entry.file)
        if not entry.member and entry.role != "own":  # the protocol knows only DTR's traces
            raise SheetError(f"{path}:{number}", "role own for a trace of your own", entry.role)
        entries[entry.name] = entry
    if not entries:
        raise SheetError(str(path), "at least one trace row", "none")
    return list(entries.values())


def find_entry(name: str, sheet: str | Path = DEFAULT_SHEET) -> TraceEntry:
    """The sheet's row for trace `name`; an unknown name is a UserError listing the known ones."""
    entries = read_sheet(sheet)
    for entry in entries:
        if entry.name == name:
            return entry
    known = ", ".join(e.name for e in entries)
    raise UserError(str(sheet), f"a trace name listed there ({known}) or a .log path", repr(name))


def _is_url(source: str) -> bool:
    return re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", source) is not None


def _copy(source: str, dest: Path) -> None:
    try:
        shutil.copyfile(source, dest)
    except OSError as exc:
        raise FetchError(source, "a readable archive file", exc.strerror or str(exc)) from None


def _download(url: str, dest: Path, retries: int) -> None:
    problem = "no attempt made"
    for attempt in range(max(retries, 1)):
        if attempt:
            time.sleep(min(2**attempt, 30))
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(dest, "wb") as f:
                shutil.copyfileobj(response, f)
            return
        except urllib.error.HTTPError as exc:
            problem = f"HTTP {exc.code} {exc.reason}"
            if 400 <= exc.code < 500:
                break  # the address is wrong; asking again will not help
        except (OSError, ValueError) as exc:  # URLError and timeouts are OSErrors
            problem = str(getattr(exc, "reason", None) or exc)
    raise FetchError(url, f"a reachable archive (tried {max(retries, 1)} times)", problem)


def _verify(source: str, path: Path, entries: list[TraceEntry]) -> None:
    found = sha256_file(path)
    if found != ARCHIVE_SHA256:
        raise FetchError(source, f"sha256 {ARCHIVE_SHA256}", f"sha256 {found}")
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        for entry in (e for e in entries if e.member):
            where = f"{source}:{entry.member}"
            if entry.member not in names:
                raise FetchError(where, "the archive member listed in the trace sheet", "none")
            found = hashlib.sha256(archive.read(entry.member)).hexdigest()
            if found != entry.sha256:
                raise FetchError(where, f"sha256 {entry.sha256}", f"sha256 {found}")


def fetch_archive(
    data_dir: Path,
    source: str | None = None,
    retries: int = 3,
    *,
    sheet: str | Path = DEFAULT_SHEET,
) -> Path:
    """Return data_dir/dtr-logs.zip, verified, copying or downloading it first if needed.

    `source` is a local mirror file or a URL; default $DTR_HOLES_ARCHIVE, else ARCHIVE_URL.
    """
    target = Path(data_dir) / ARCHIVE_NAME
    if target.is_file() and sha256_file(target) == ARCHIVE_SHA256:
        return target
    source = source or os.environ.get(ARCHIVE_ENV) or ARCHIVE_URL
    entries = read_sheet(sheet)
    with files.atomic(target) as tmp:
        if _is_url(source):
            _download(source, tmp, retries)
        else:
            _copy(source, tmp)
        _verify(source, tmp, entries)
    return target


def compiled_path(data_dir: Path, entry: TraceEntry) -> Path:
    """Where the compiled form of `entry` is cached."""
    return Path(data_dir) / "compiled" / f"{entry.name}-{entry.sha256[:16]}.parquet"


def _cached(path: Path, sha256: str) -> Trace | None:
    if not store.is_current(path, sha256):
        return None
    try:
        return store.load_trace_file(path)
    except TraceError:
        return None  # a damaged cache entry is rebuilt, not reported


def trace_bytes(
    entry: TraceEntry, data_dir: Path, archive: str | None = None, *, sheet: str | Path
) -> tuple[bytes, str]:
    """The row's trace bytes, checked against its sha256, and the label errors name them by:
    read from the archive in data_dir (fetched there if missing; as it is otherwise, so that an
    edited member is refused, not replaced), from the file, or generated."""
    if entry.member:
        path = Path(data_dir) / ARCHIVE_NAME
        if not path.is_file():
            path = fetch_archive(data_dir, archive, sheet=sheet)
        label = f"{path}:{entry.member}"
        data = member_bytes(path, entry.member)
    elif entry.derived:
        base, recipe = entry.derived
        label = f"{sheet}: {entry.name} ({entry.file})"
        source, _ = trace_bytes(find_entry(base, sheet), data_dir, archive, sheet=sheet)
        data = recost.recost(source, label, recipe)
    else:
        label = str(entry.path)
        data = file_bytes(entry.path)
    found = hashlib.sha256(data).hexdigest()
    if found != entry.sha256:
        raise FetchError(label, f"sha256 {entry.sha256} (the trace sheet's)", found)
    return data, label


def load_trace(
    name_or_path: str,
    data_dir: Path,
    archive: str | None = None,
    *,
    sheet: str | Path = DEFAULT_SHEET,
) -> Trace:
    """A trace by sheet name (read or generated, verified, compiled and cached under data_dir)
    or by file path. A path ending in .log is parsed directly, one ending in .parquet is read
    as a stored trace.
    """
    if name_or_path.endswith(".log"):
        return read_trace(name_or_path)
    if name_or_path.endswith(".parquet"):
        return store.load_trace_file(name_or_path)
    entry = find_entry(name_or_path, sheet)
    cache = compiled_path(data_dir, entry)
    trace = _cached(cache, entry.sha256)
    if trace is None:
        data, label = trace_bytes(entry, data_dir, archive, sheet=sheet)
        trace = parse_trace(data, label, entry.name)
        store.save_trace(trace, cache)
    return trace
