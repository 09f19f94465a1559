"""Policy comparison against DTR: H1 (failing budgets), H2 (overhead), H3 (stable-from)."""

from __future__ import annotations

import math

import pytest

from dtrholes.report.hypotheses import compare, markdown


def rows(
    policy: str, outcomes: str, overheads=None, trace: str = "t", version: str = "v2"
) -> list[dict]:
    """Records at budgets 10, 20, ...: o ok, x oom, t thrashed, - timeout."""
    names = {"o": "ok", "x": "oom", "t": "thrashed", "-": None}
    overheads = overheads or [2.0] * len(outcomes)
    return [
        {
            "trace": trace,
            "policy": policy,
            "stage": "A",
            "budget": 10 * (i + 1),
            "ratio": None,
            "status": "timeout" if o == "-" else "complete",
            "outcome": names[o],
            "overhead": overheads[i] if o == "o" else None,
            "protocol_version": version,
            "amendments": [f"amend-{policy}"],
        }
        for i, o in enumerate(outcomes)
    ]


def verdicts(dtr: list[dict], other: list[dict]) -> dict:
    (row,) = compare(dtr + other, {"t": "confirmatory"}, "v2")
    return row


def test_a_policy_without_dtrs_hole_holds_h1_and_h3() -> None:
    row = verdicts(rows("dtr", "xoxxoo"), rows("p", "xooooo"))
    assert (row["h1"], row["h1_failing_above"], row["h1_dtr_failing_above"]) == ("holds", 0, 2)
    assert (row["h3"], row["h3_stable_from"], row["h3_dtr_stable_from"]) == ("holds", 20, 50)
    assert row["role"] == "confirmatory" and row["policy"] == "p"


def test_a_policy_with_an_extra_hole_fails_h1_and_h3() -> None:
    row = verdicts(rows("dtr", "xooooo"), rows("p", "xooxoo"))
    assert (row["h1"], row["h3"]) == ("fails", "fails")


def test_h2_is_the_geometric_mean_over_budgets_where_both_complete() -> None:
    dtr = rows("dtr", "xooo", [0, 2.0, 2.0, 2.0])
    other = rows("p", "ooox", [1.0, 2.2, 1.8, 0])
    row = verdicts(dtr, other)
    assert row["h2_budgets"] == 2
    assert row["h2_geomean"] == pytest.approx(math.sqrt(1.1 * 0.9))
    assert row["h2_worst"] == pytest.approx(1.1) and row["h2"] == "holds"
    worse = verdicts(dtr, rows("p", "ooox", [1.0, 2.4, 2.4, 0]))
    assert worse["h2"] == "fails"


def test_timeouts_make_a_verdict_unresolved_only_when_they_could_flip_it() -> None:
    # Counting the timeout as a failure would move p's stable-from above DTR's.
    assert verdicts(rows("dtr", "xxoooo"), rows("p", "xoo-oo"))["h3"] == "unresolved"
    # Here it cannot: p is stable from 30 either way, DTR from 50.
    assert verdicts(rows("dtr", "xo-xoo"), rows("p", "x-oooo"))["h3"] == "holds"


def test_dtr_itself_and_traces_without_dtr_are_not_compared() -> None:
    assert compare(rows("dtr", "xo") + rows("p", "xo", trace="u"), {}, "v2") == []


def test_markdown_lists_every_row() -> None:
    table = [verdicts(rows("dtr", "xoxo"), rows("p", "xooo"))]
    text = markdown(table, "abc")
    assert "abc" in text and "| t | confirmatory | p | holds (0 / 1)" in text


def test_rows_name_their_protocol_versions_and_mark_older_ones() -> None:
    row = verdicts(rows("dtr", "xo", version="v1"), rows("p", "xo"))
    assert row["protocol_versions"] == "v1,v2" and row["older_protocol"]
    assert row["amendments"] == "amend-dtr,amend-p"
    assert "| t † | confirmatory | p |" in markdown([row], "v2")
    assert not verdicts(rows("dtr", "xo"), rows("p", "xo"))["older_protocol"]


def test_a_baseline_is_compared_with_dtr_on_the_stages_it_ran() -> None:
    # DTR's Stage B sample at 35 fails; the baseline ran Stage A only, so DTR is read there too.
    dtr = rows("dtr", "xoooo")
    refined = {**dtr[2], "stage": "B", "budget": 35, "outcome": "oom", "overhead": None}
    row = verdicts([*dtr, refined], rows("p", "xoooo"))
    assert (row["h1"], row["h1_dtr_failing_above"], row["h3_dtr_stable_from"]) == ("holds", 0, 20)
