"""Shared fixtures: the verified trace archive, traces by name, and simrd's reference results."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dtrholes import fetch
from simulator.trace import Trace

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_MIRROR = REPO_ROOT.parent / "shared" / "traces" / "dtr-logs.zip"
REFERENCE = Path(__file__).parent / "data" / "simrd_reference.jsonl"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, then the other workflow tests, then the unit tests: pytest-xdist
    hands tests to its workers in this order, so the pipeline runs of minutes overlap the many
    short tests on the other worker instead of trailing them."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("slow"):
            return 0
        return 1 if item.path.parent.name == "workflow" else 2

    items.sort(key=rank)  # stable: collection order within each rank


def archive_source() -> str:
    """$DTR_HOLES_ARCHIVE, else the shared mirror beside the clone, else the canonical URL."""
    if os.environ.get(fetch.ARCHIVE_ENV):
        return os.environ[fetch.ARCHIVE_ENV]
    if SHARED_MIRROR.is_file():
        return str(SHARED_MIRROR)
    return fetch.ARCHIVE_URL


@pytest.fixture(scope="session")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verified archive, fetched once per session into a temporary data directory."""
    return fetch.fetch_archive(tmp_path_factory.mktemp("data"), archive_source())


@pytest.fixture(scope="session")
def load_named(archive: Path) -> Callable[[str], Trace]:
    """Trace name -> compiled Trace, compiled once per session (cached beside the archive)."""

    @functools.cache
    def load(name: str) -> Trace:
        return fetch.load_trace(name, archive.parent, str(archive))

    return load


@pytest.fixture(scope="session")
def reference_rows() -> tuple[dict, ...]:
    """simrd's reference results: one dict per line of tests/data/simrd_reference.jsonl."""
    with open(REFERENCE, encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


@pytest.fixture(scope="session")
def assert_same_trace() -> Callable[[Trace, Trace], None]:
    """Asserts two traces are identical, naming the first differing field."""

    def check(a: Trace, b: Trace) -> None:
        for field in dataclasses.fields(Trace):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype, f"{field.name}: dtype {x.dtype} != {y.dtype}"
                assert np.array_equal(x, y), f"{field.name} differs"
            else:
                assert x == y, f"{field.name} differs"

    return check
