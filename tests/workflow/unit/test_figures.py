"""The figures a reader opens first: region zooms per trace × policy and the study's Figure 1."""

from __future__ import annotations

import json

import pandas as pd

from dtrholes.report import figures

PEAK = 1000


def _records(budgets: dict[int, str], trace: str = "resnet32") -> pd.DataFrame:
    rows = [
        {
            "trace": trace,
            "policy": "dtr",
            "stage": "A",
            "status": "complete",
            "outcome": outcome,
            "budget": budget,
            "ratio": budget / PEAK,
            "repeat": 0,
            "peak_pinned_depth": 3 if outcome == "ok" else 40,
        }
        for budget, outcome in budgets.items()
    ]
    return pd.DataFrame(rows)


def _holes(regions: list[tuple[int, int, int, int]], trace: str = "resnet32") -> pd.DataFrame:
    brackets = [
        {"ok_below": a, "first_fail": b, "last_fail": c, "ok_above": d, "failing": c - b + 1}
        for a, b, c, d in regions
    ]
    edges = [{"below": a + 1, "above": a + 2} for a, *_ in regions]
    row = {
        "trace": trace,
        "policy": "dtr",
        "region_brackets": json.dumps(brackets),
        "exact_edges": json.dumps(edges),
    }
    return pd.DataFrame([row])


def test_a_zoom_draws_at_most_twelve_regions_and_tables_them_all() -> None:
    # Fourteen regions; the two with the fewest failing samples are left to the table.
    regions = [(100 * i, 100 * i + 10, 100 * i + 10 + (i % 7), 100 * i + 30) for i in range(14)]
    holes = _holes(regions)
    shown = figures.drawn(figures.zoom_regions(holes, "dtr"))
    assert len(shown) == figures.ZOOM_PANELS and 0 not in shown and 7 not in shown
    fig = figures.zooms(_records({5: "ok"}), holes, PEAK, "resnet32", "dtr")
    assert sum(ax.axison for ax in fig.axes) == 12 and len(fig.axes) == 12
    assert "14 hole regions; 2 more in the table" in fig._suptitle.get_text()
    table = figures.zoom_table(holes, PEAK, "resnet32", "dtr")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "region" not in line]
    assert len(rows) == 14 and sum(row.endswith("| no |") for row in rows) == 2


def test_figure_one_frames_the_regions_and_rings_the_resolved_study_timeouts() -> None:
    outcomes = {b: "ok" for b in range(100, 111)} | {b: "oom" for b in range(103, 107)}
    panel = ("resnet32", _records(outcomes), _holes([(102, 103, 106, 107)]), PEAK)
    ringed = figures.figure1([panel], {("resnet32", 104), ("resnet32", 200)})
    ax = ringed.axes[0]
    assert ax.get_xlim() == (100.5 / PEAK, 108.5 / PEAK)  # the region, 30 % either side
    labels = [c.get_label() for c in ax.collections]
    assert "study timed out, resolved here" in labels
    (ring,) = [c for c in ax.collections if c.get_label().startswith("study")]
    assert ring.get_offsets().tolist() == [[104 / PEAK, 40]]
    plain = figures.figure1([panel], set())
    assert "study timed out, resolved here" not in [
        c.get_label() for c in plain.axes[0].collections
    ]
