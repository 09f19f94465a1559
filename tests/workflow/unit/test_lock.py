"""The pinned environment (requirements.lock) and the records that name it."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest

from dtrholes.core import provenance
from dtrholes.study import records
from tests.support.records import USAGE, request

REPO_ROOT = Path(__file__).resolve().parents[3]
LOCK = REPO_ROOT / "requirements.lock"
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)")


def normalise(name: str) -> str:
    """PEP 503: pip treats `PyYAML`, `pyyaml` and `py_yaml` as one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """Every distribution pyproject.toml names: its dependencies and every extra's."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"].values()
    requirements = project["dependencies"] + [r for extra in extras for r in extra]
    return {normalise(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r).group()) for r in requirements}


def pinned_lines() -> list[str]:
    lines = LOCK.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if not line.startswith("#")]


def test_lock_pins_every_dependency_and_extra() -> None:
    pinned = {normalise(m.group(1)) for line in pinned_lines() if (m := PIN.fullmatch(line))}
    assert declared() - pinned == set()


def test_lock_lines_are_exact_pins_named_once() -> None:
    lines = pinned_lines()
    assert lines, "no pins"
    assert [line for line in lines if not PIN.fullmatch(line)] == []
    names = [normalise(PIN.fullmatch(line).group(1)) for line in lines]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_records_name_the_lock_sha256(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert provenance.code()["lock_sha256"] == hashlib.sha256(LOCK.read_bytes()).hexdigest()
    monkeypatch.setattr(provenance, "LOCK", tmp_path / "requirements.lock")
    assert provenance.code.__wrapped__()["lock_sha256"] is None  # an installed copy


def test_records_without_the_lock_sha256_stay_valid() -> None:
    made = records.make_record(request(150), USAGE, None)
    record = {**made, "code": dict(made["code"])}  # records share provenance's cached dict
    assert len(record["code"]["lock_sha256"]) == 64
    records.validate(record, "current")
    del record["code"]["lock_sha256"]
    records.validate(record, "from before the lock")
    record["code"]["lock_sha256"] = "not a digest"
    with pytest.raises(records.RecordError):
        records.validate(record, "malformed")
