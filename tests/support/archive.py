"""The study's trace archive for the tests, read with the simulator alone: its source, a
verified copy, the trace sheet, and traces by name (the workflow's `fetch` does the same for
the pipeline; a workflow test checks that the two agree)."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import urllib.request
import zipfile
from pathlib import Path
from typing import NamedTuple

from simulator.trace import Trace, read_archive_member

REPO_ROOT = Path(__file__).resolve().parents[2]
SHEET = REPO_ROOT / "config" / "traces.tsv"
SHARED_MIRROR = REPO_ROOT.parent / "shared" / "traces" / "dtr-logs.zip"
ARCHIVE_ENV = "DTR_HOLES_ARCHIVE"
ARCHIVE_URL = (
    "https://github.com/uwsampl/dtr-prototype/raw/"
    "eff53cc4804cc7d6246a6e5086861ce2b846f62b/simrd/logs.zip"
)
ARCHIVE_SHA256 = "63579a07a6e7ce063f5ba49450dfb96a9f3995df736c423c27e1336f4365e02a"
ARCHIVE_NAME = "dtr-logs.zip"


class Entry(NamedTuple):
    """One row of the trace sheet (the study's rows: each names a member of DTR's archive)."""

    name: str
    file: str
    sha256: str
    role: str
    title: str

    @property
    def member(self) -> str:
        return self.file.removeprefix(ARCHIVE_NAME + ":")


def archive_source() -> str:
    """$DTR_HOLES_ARCHIVE, else the shared mirror beside the clone, else the canonical URL."""
    if os.environ.get(ARCHIVE_ENV):
        return os.environ[ARCHIVE_ENV]
    if SHARED_MIRROR.is_file():
        return str(SHARED_MIRROR)
    return ARCHIVE_URL


def read_sheet(path: Path = SHEET) -> list[Entry]:
    """The trace sheet's rows (tab-separated, with a header)."""
    with open(path, encoding="utf-8", newline="") as f:
        return [Entry(**row) for row in csv.DictReader(f, delimiter="\t")]


def entry(name: str) -> Entry:
    return next(e for e in read_sheet() if e.name == name)


def fetch_archive(directory: Path, source: str) -> Path:
    """A copy of the archive in `directory`, downloaded when `source` is a URL, its sha256 and
    every member the sheet lists checked."""
    target = directory / ARCHIVE_NAME
    if "://" in source:
        with urllib.request.urlopen(source, timeout=60) as response, open(target, "wb") as f:
            shutil.copyfileobj(response, f)
    else:
        shutil.copyfile(source, target)
    found = hashlib.sha256(target.read_bytes()).hexdigest()
    assert found == ARCHIVE_SHA256, f"{source}: sha256 {found}, expected {ARCHIVE_SHA256}"
    with zipfile.ZipFile(target) as archive:
        for e in read_sheet():
            assert e.file.startswith(ARCHIVE_NAME + ":"), f"{e.name}: not an archive member"
            found = hashlib.sha256(archive.read(e.member)).hexdigest()
            assert found == e.sha256, f"{source}:{e.member}: sha256 {found}, expected {e.sha256}"
    return target


def load_trace(archive: Path, name: str) -> Trace:
    """The trace the sheet names `name`, parsed from the (verified) archive."""
    e = entry(name)
    return read_archive_member(archive, e.member, e.name)
