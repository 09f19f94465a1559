"""The run settings: which traces a run works on, own traces included."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dtrholes.study import settings
from dtrholes.traces import fetch
from simulator import UserError

REPO = Path(__file__).resolve().parents[3]
STUDY = [
    "resnet32",
    "lstm",
    "densenet121",
    "inceptionv4",
    "transformer",
    "unet",
    "treelstm",
    "unroll_gan",
]


def config(sheet: Path, **given) -> dict:
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return base | {"protocol": str(REPO / "protocol"), "trace_sheet": str(sheet)} | given


@pytest.fixture
def sheet(tmp_path: Path) -> Path:
    path = tmp_path / "traces.tsv"
    own = f"mine\ttraces/mine.log\t{'a' * 64}\town\tMine"
    path.write_text(fetch.DEFAULT_SHEET.read_text() + own + "\n")
    return path


def test_own_traces_run_with_the_switch_or_when_named(sheet: Path) -> None:
    assert list(settings.load(config(sheet)).traces) == STUDY
    switched = settings.load(config(sheet, own=True))
    assert list(switched.traces) == [*STUDY, "mine"]
    assert switched.own == {"mine": "a" * 64}
    named = settings.load(config(sheet, traces=["mine", "unet"]))
    assert named.own == {"mine": "a" * 64} and list(named.traces) == ["mine", "unet"]
    assert settings.load(config(sheet, traces=["unet"], own=True)).own == {}


def test_the_switch_is_a_boolean(sheet: Path) -> None:
    with pytest.raises(UserError, match="config key own"):
        settings.load(config(sheet, own="yes"))
