"""Counting feasibility holes in a sampled series by the study's rules."""

from __future__ import annotations

import pytest

from dtrholes.core.samples import Sample
from dtrholes.holes.feasibility import Hole
from dtrholes.holes.sampled_holes import summarise
from simulator import UserError


def series(*outcomes: str) -> list[Sample]:
    """Outcomes at budgets 10, 20, 30, ... ('-' for a timeout)."""
    names = {"o": "ok", "x": "oom", "t": "thrashed", "-": "timeout"}
    return [Sample(budget=10 * (i + 1), outcome=names[o]) for i, o in enumerate(outcomes)]


def test_resnet32_like_region() -> None:
    # fail fail ok | fail fail fail | ok ok: one region with its brackets, stable from 70.
    s = summarise(series(*"xxoxxxoo"))
    assert s.first_success == 30
    assert s.failing_above == (40, 50, 60) and s.oom_above == 3 and s.thrashed_above == 0
    assert s.holes == (Hole(first=40, last=60, ok_below=30, ok_above=70, failing=3),)
    assert s.stable_from == 70 and s.unresolved == 0


def test_timeouts_do_not_split_regions_and_are_counted() -> None:
    s = summarise(series(*"ox-xot-o"))
    assert s.holes == (Hole(20, 40, 10, 50, 2), Hole(60, 60, 50, 80, 1))
    assert s.unresolved == 2 and s.oom_above == 2 and s.thrashed_above == 1


def test_failures_without_a_completing_sample_above_are_no_region() -> None:
    s = summarise(series(*"oxoxx"))
    assert s.holes == (Hole(20, 20, 10, 30, 1),)
    assert s.failing_above == (20, 40, 50) and s.stable_from is None


def test_never_completing_series() -> None:
    s = summarise(series(*"xxx"))
    assert s.first_success is None and s.failing_above == () and s.holes == ()


def test_monotone_series_has_no_hole() -> None:
    s = summarise(series(*"xxooo"))
    assert s.holes == () and s.failing_above == () and s.stable_from == 30


def test_agreeing_repeats_collapse_and_disagreeing_ones_are_an_error() -> None:
    assert summarise(series(*"xo") + series("x")).samples == 2
    with pytest.raises(UserError, match="repeats with one outcome"):
        summarise(series(*"xo") + series("o"))
