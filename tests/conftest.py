"""Shared fixtures: the verified trace archive, traces by name, and simrd's reference results.
They use the simulator alone (tests/support/archive.py), so the simulator's tests import
nothing of the workflow."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from simulator.trace import Trace
from tests.support.archive import archive_source, fetch_archive, load_trace

REFERENCE = Path(__file__).parent / "data" / "simrd_reference.jsonl"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, then the pipeline's other tests (tests/workflow/), then the unit
    tests: pytest-xdist hands tests to its workers in this order, so the pipeline runs of
    minutes overlap the many short tests on the other worker instead of trailing them."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("slow"):
            return 0
        return 1 if item.path.parent.name == "workflow" else 2

    items.sort(key=rank)  # stable: collection order within each rank


@pytest.fixture(scope="session")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verified archive, fetched once per session into a temporary data directory."""
    return fetch_archive(tmp_path_factory.mktemp("data"), archive_source())


@pytest.fixture(scope="session")
def load_named(archive: Path) -> Callable[[str], Trace]:
    """Trace name -> Trace, parsed once per session."""

    @functools.cache
    def load(name: str) -> Trace:
        return load_trace(archive, name)

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
