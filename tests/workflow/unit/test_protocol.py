"""The protocol: base plus dated amendments, validation errors, versions and provenance."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from dtrholes.study import protocol
from dtrholes.study.protocol import ProtocolError

REPO = Path(__file__).resolve().parents[3]
# The latest shipped amendment's date: the amendments tests add are dated then (or later).
TODAY = max(
    dt.date.fromisoformat(p.name[:10]) for p in (REPO / "protocol/amendments").glob("*.yaml")
)
DAY, NEXT_DAY = TODAY.isoformat(), (TODAY + dt.timedelta(days=1)).isoformat()
PREV_DAY = (TODAY - dt.timedelta(days=1)).isoformat()


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "protocol", tmp_path / "protocol")
    return tmp_path / "protocol"


def amend(directory: Path, name: str, text: str) -> Path:
    path = directory / "amendments" / name
    path.write_text(text)
    return path


ADD_LRU = f"""\
date: {DAY}
title: LRU as a baseline
kind: amendment
reason: A policy that reads no graph at all.
changes:
  - path: policies/lru
    new: {{}}
"""


def test_shipped_history_reproduces_the_study() -> None:
    current = protocol.load(REPO / "protocol", TODAY)
    assert current.fixed == dt.date(2026, 9, 26)
    assert list(current.parameters["policies"]) == [
        "dtr",
        "nbhd-penalty",
        "two-phase",
        "he-star",
        "cost-stale",
        "tcontrol-inspired",
    ]
    assert current.value("stage_b/triggers") == ["status", "overhead", "stage_c"]
    assert current.value("confirmation") == {"repeats": 3, "points": "brackets", "simrd": ["dtr"]}
    dates = [a.date for a in current.history]
    assert dates == sorted(dates) and dates[0] == current.fixed
    kinds = {a.kind for a in current.history}
    assert kinds == {"amendment", "execution-note"}
    assert all(not a.changes for a in current.history if a.kind == "execution-note")


def test_version_is_a_content_hash_of_the_parameters(shipped: Path) -> None:
    before = protocol.load(shipped, TODAY)
    assert before.version == protocol.load(shipped, TODAY).version
    assert len(before.version) == 12
    amend(shipped, f"{DAY}-zz-note.yaml", NOTE)
    assert protocol.load(shipped, TODAY).version == before.version  # a note changes nothing
    amend(shipped, f"{DAY}-zz-lru.yaml", ADD_LRU)
    after = protocol.load(shipped, TODAY)
    assert after.version != before.version and after.parameters["policies"]["lru"] == {}
    assert after.sources(["policies/lru"]) == (f"{DAY}-zz-lru",)
    assert after.sources(["policies/dtr", "stage_a"]) == ()
    assert after.sources(["policies"])[-1] == f"{DAY}-zz-lru"  # a parent path sees it


NOTE = f"""\
date: {DAY}
title: Ran on a laptop
kind: execution-note
reason: Nothing changes.
changes: []
"""


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (f"{DAY}-broken.yaml", "date: [unclosed", "broken.yaml:1:16: expected a readable YAML"),
        (f"{DAY}-saved-as.yml", ADD_LRU, "expected the extension .yaml, found .yml"),
        (f"{DAY}-saved-as.YAML", ADD_LRU, "expected the extension .yaml, found .YAML"),
        (f"{PREV_DAY}-misdated.yaml", ADD_LRU, f"date: expected {PREV_DAY}, as its file name"),
        (f"{DAY}-no-reason.yaml", ADD_LRU.replace("reason:", "why:"), "reason"),
        (f"{DAY}-kind.yaml", ADD_LRU.replace("kind: amendment", "kind: erratum"), "kind"),
        (f"{DAY}-unknown.yaml", ADD_LRU.replace("policies/lru", "stage_z/lru"), "stage_z"),
        (
            f"{DAY}-unknown-leaf.yaml",
            ADD_LRU.replace("policies/lru\n    new: {}", "stage_a/speed\n    new: 3"),
            "speed",
        ),
        (
            f"{DAY}-missing.yaml",
            ADD_LRU.replace("new: {}", "old: {}\n    new: {b: 1}"),
            "no parameter 'lru'",
        ),
        (
            f"{DAY}-old.yaml",
            ADD_LRU.replace(
                "policies/lru\n    new: {}", "limits/overhead_cap\n    old: 50\n    new: 70"
            ),
            "old value 60, found 50",
        ),
        (f"{DAY}-exists.yaml", ADD_LRU.replace("policies/lru", "policies/dtr"), "existing"),
        ("2026-09-25-early.yaml", ADD_LRU.replace(DAY, "2026-09-25"), "on or after"),
        (f"{NEXT_DAY}-future.yaml", ADD_LRU.replace(DAY, NEXT_DAY), "not later than"),
        (f"{DAY}-bad-date.yaml", ADD_LRU.replace(DAY, "2026-13-01"), "date"),
        ("notes.yaml", ADD_LRU, "YYYY-MM-DD-slug.yaml"),
        (f"{DAY}-note-changes.yaml", ADD_LRU.replace("amendment", "execution-note"), "changes"),
        (f"{DAY}-policy.yaml", ADD_LRU.replace("policies/lru", "policies/fifo"), "fifo"),
        (
            f"{DAY}-param.yaml",
            ADD_LRU.replace("policies/lru\n    new: {}", "policies/dtr/b\n    new: 1"),
            "policies/dtr",
        ),
    ],
)
def test_a_bad_amendment_is_one_error_naming_the_file(shipped, name, text, message) -> None:
    path = amend(shipped, name, text)
    with pytest.raises(ProtocolError, match=message) as info:
        protocol.load(shipped, TODAY)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_bad_base_is_one_error_naming_the_file(shipped: Path) -> None:
    base = shipped / "base.yaml"
    base.write_text(base.read_text().replace("overhead_cap: 60", "overhead_cap: 0.5"))
    with pytest.raises(ProtocolError, match="overhead_cap") as info:
        protocol.load(shipped, TODAY)
    assert str(base) in str(info.value)


def test_amendments_apply_in_date_order_then_by_file_name(shipped: Path) -> None:
    first = ADD_LRU
    second = ADD_LRU.replace("policies/lru\n    new: {}", "policies/lru\n    old: {}")
    amend(shipped, f"{DAY}-zz-a-add.yaml", first)
    amend(shipped, f"{DAY}-zz-b-remove.yaml", second)
    current = protocol.load(shipped, TODAY)
    assert "lru" not in current.parameters["policies"]
    assert [a.id for a in current.history[-2:]] == [f"{DAY}-zz-a-add", f"{DAY}-zz-b-remove"]


def test_show_and_render_carry_the_history() -> None:
    current = protocol.load(REPO / "protocol", TODAY)
    text = protocol.describe(current)
    assert current.version in text and "2026-09-26-tcontrol-inspired" in text
    assert 'confirmation/points: "brackets" -> "region"' in text
    assert 'confirmation/points: "region" -> "brackets"' in text
    rendered = protocol.render(current)
    assert rendered["version"] == current.version
    assert [h["id"] for h in rendered["history"]] == [a.id for a in current.history]
