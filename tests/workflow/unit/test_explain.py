"""Explanations of a hole on a tiny trace whose mechanism is derived by hand below."""

from __future__ import annotations

import dataclasses
import json
import struct

import pytest

from dtrholes.cli import main
from dtrholes.explain import build, decisions, markdown, mechanism, types
from dtrholes.report import figures
from simulator import UserError, peak_memory, simulate, simulate_events
from simulator import centrality as central
from tests.support.tracegen import random_trace_text, tiny_trace

# Generated trace 193 (12 instructions). Operators: 0 the constant x1 (39 bytes), 1 x2 (77),
# 2 x3/x4 (views of x2) and x5 (98), 3 x6 (40), x7 (95), x8 (79), 4 x10 (88) and x11 (0),
# 5 x12, 6 x1 mutated into x1$, 7 x3$, 8 x13, 9 the constant x14 (59).
# Step 3 needs 214 bytes on top of 214: both budgets evict x5 (decision 0). After it and the
# free of x6, 290 bytes are in use, and step 4 asks for 88: 378 bytes fit a budget of 378 but
# not of 377, which evicts x2 (decision 1). That is where the runs part: the completing run's
# decision 1 is x2 at step 4, the failing run's is x8 at step 5 (op 2: recomputing x5).
# The failing run then evicts x1$ at step 9 (e* = 0: the zero score stops the scan), which the
# same step needs again: x1$ (depth 1) needs x10 (2), which needs x8 (3), which needs x2 (4).
# Rebuilding x8 asks for 214 bytes with 175 pinned: 11 over a budget of 378, nothing left.
# Never evicting x1$ keeps that cascade from starting, and the run completes.
TRACE = tiny_trace(random_trace_text(193, 12))
OK, FAIL = 377, 378


@pytest.fixture(scope="module")
def found() -> types.Explanation:
    pair = build.Pair(TRACE, "dtr", OK, FAIL, peak=peak_memory(TRACE))
    return build.explain(pair)


def test_divergence_is_the_one_byte_at_step_four(found) -> None:
    d = found.divergence
    assert d.common_prefix == 1
    assert (d.ok.step, d.ok.storage, d.ok.shortfall) == (4, "x2", 1)
    assert (d.fail.step, d.fail.op, d.fail.storage) == (5, 2, "x8")
    assert d.before.ok == types.EventCounts(evictions=1, rematerializations=0)
    assert found.ok.outcome == "ok" and found.fail.outcome == "oom"


def test_cascade_rebuilds_what_step_nine_evicted(found) -> None:
    c = found.cascade
    assert (c.step, c.op, c.request, c.pinned, c.depth) == (9, 3, 214, 175, 3)
    assert c.over_budget == 11
    chain = [(f.storage, f.depth, f.removed_by) for f in c.rebuilding]
    assert chain == [("x1$", 1, "evict"), ("x10", 2, "evict"), ("x8", 3, "free")]
    outermost = c.rebuilding[0]
    assert (outermost.evicted_at_step, outermost.steps_before_failure) == (9, 0)


def test_retaining_the_rebuilt_storage_completes_and_the_control_fails(found) -> None:
    r = found.retention
    assert r.storage == "x1$"
    assert r.intervention.outcome == "ok" and r.retaining_completes
    assert r.control == found.fail and r.valid


def test_probe_ranks_the_zero_score_first(found) -> None:
    p = found.probe
    assert (p.first_step, p.last_step) == (4, 9)  # from the contrasting decision
    first = next(d for d in p.fail.decisions if d.step == 9)
    assert (first.storage, first.rank, first.score) == ("x1$", 1, 0.0)
    # The scan stops at the zero: candidates after x1$ in pool order were never evaluated.
    assert first.candidates == 4


def test_the_mechanism_tells_the_hand_traced_story(found) -> None:
    m = found.mechanism
    assert (m.budget_difference, m.storage, m.size) == (1, "x1$", 39)
    assert (m.removed_at_step, m.needed_at_step, m.steps_until_failure) == (9, 9, 0)
    # Step 4: 378 bytes fit the failing budget exactly; the completing one, a byte short,
    # evicts x2, which the failing run keeps to the end.
    k = m.contrast
    assert (k.step, k.storage, k.shortfall, k.failing_shortfall) == (4, "x2", 1, 0)
    e = m.eviction
    assert (e.step, e.rank, e.candidates, e.score) == (9, 1, 4, 0.0)
    assert (e.runner_up, e.shortfall) == ("x8", 32)
    f = m.failure
    assert (f.depth, f.pinned, f.over_budget, f.outcome) == (3, 175, 11, "oom")
    assert m.retention == types.RetentionNumbers(outcome="ok", overhead=1.71875, valid=True)
    first, second = m.text.split(". ")[:2]
    assert first == (
        "The failing budget has 1 byte more than the completing one, yet its run evicts x1$"
        " (39 bytes) at step 9 and fails (OOM) in that same step, which needs it again"
    )
    assert "evicts x2 (77 bytes), which the failing run keeps" in second
    assert "fits exactly" in second


def test_the_mechanism_comes_first_and_from_the_rest(found) -> None:
    assert next(iter(types.to_json(found))) == "mechanism"
    parts = found.ok, found.fail, found.decisive, found.cascade, found.retention
    assert mechanism.mechanism(*parts) == found.mechanism
    text = markdown.markdown(found)
    assert text.split("\n")[2] == f"**Mechanism.** {found.mechanism.text}"


def test_the_decisive_decisions_are_listed_before_any_elision(found) -> None:
    pair = build.Pair(TRACE, "dtr", OK, FAIL, peak=peak_memory(TRACE))
    capped = build.explain(pair, decisions=0)  # the window's decisions all left out
    assert capped.decisive == found.decisive
    assert capped.probe.ok.decisions == ()
    text = markdown.markdown(capped)
    contrast = "| ok | 1 | 4 | 4 | 1 | **x2 (1 / 2): contrast: the failing run keeps it** |"
    eviction = "| fail | 8 | 9 | 9 | 32 | **x1$ (1 / 4): evicts x1$: the failure rebuilds it** |"
    assert contrast in text and eviction in text
    omitted = capped.probe.fail.omitted
    assert text.index(eviction) < text.index(f"| fail | … {omitted} decisions in the window's")


def test_a_wider_window_lists_both_runs(found) -> None:
    pair = build.Pair(TRACE, "dtr", OK, FAIL)
    wide = build.explain(pair, window=(3, 9), top=2)
    assert [d.step for d in wide.probe.ok.decisions][:2] == [3, 4]
    assert all(len(d.top) <= 2 for d in wide.probe.fail.decisions)


@pytest.mark.parametrize("most", [0, 1, 4])
def test_a_capped_probe_lists_the_windows_first_and_last_decisions(most: int, found) -> None:
    pair = build.Pair(TRACE, "dtr", OK, FAIL)
    every = build.explain(pair, window=(0, 12)).probe
    capped = build.explain(pair, window=(0, 12), decisions=most).probe
    for run in ("ok", "fail"):
        listed = getattr(every, run).decisions
        assert len(listed) > 4 and getattr(every, run).omitted == 0
        head, tail = listed[: most // 2], listed[len(listed) - (most - most // 2) :]
        assert getattr(capped, run).decisions == head + tail
        assert getattr(capped, run).omitted == len(listed) - most
        assert getattr(capped, run).steps == getattr(every, run).steps
    text = markdown.markdown(dataclasses.replace(found, probe=capped))
    assert f"… {len(every.fail.decisions) - most} decisions in the window's middle" in text


def test_markdown_and_figure_come_from_the_json(found, tmp_path) -> None:
    text = markdown.markdown(found)
    assert "Both runs make the same first 1 eviction decisions" in text
    assert "the intervention is valid" in text
    paths = figures.explanation(found, tmp_path / "pair")
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size for p in paths)


def test_the_figure_shows_storage_names_with_dollar_signs_literally(found, tmp_path) -> None:
    # Traces name mutated tensors x1$, x1$$, ...: "$$" in a label is not mathtext.
    m = found.mechanism
    contrast = dataclasses.replace(m.contrast, storage="x52942$$")
    renamed = dataclasses.replace(m, storage="x52942$$", contrast=contrast)
    paths = figures.explanation(dataclasses.replace(found, mechanism=renamed), tmp_path / "pair")
    assert all(p.stat().st_size for p in paths)


def test_the_mechanism_figure_has_a_row_per_decisive_step(found) -> None:
    # Step 4: the completing run evicts x2, the failing run fits; step 9 evicts x1$ and needs
    # it again (one row): the completing run completes, the failing one runs out of memory.
    (step, (ok, fail)), (last, (done, oom)) = figures.mechanism_rows(found)
    assert (step, last) == (4, 9)
    assert "evicts x2 (77 B)" in ok[0] and "fits exactly; keeps x2" in fail[0]
    assert (ok[1], fail[1], done[1], oom[1]) == ("step", "step", "ok", "oom")
    assert "evicts x1$ (39 B), ranked 1st of 4" in oom[0] and oom[0].endswith("OOM")
    assert done[0].startswith("x1$ in memory; completes: overhead")


def test_the_mechanism_figure_is_byte_stable(found, tmp_path) -> None:
    first = figures.explanation(found, tmp_path / "a" / "pair", (".png",))[0]
    read = types.from_json(json.loads(json.dumps(types.to_json(found))))
    again = figures.explanation(read, tmp_path / "b" / "pair", (".png",))
    assert first.read_bytes() == again[0].read_bytes()
    assert b"Software" not in first.read_bytes() and b"tIME" not in first.read_bytes()
    # A fixed layout: 10 inches wide, 1.25 of titles, 1.55 per row (two), 0.75 of footer.
    width, height = struct.unpack(">II", first.read_bytes()[16:24])
    assert (width, height) == (1500, round((1.25 + 2 * 1.55 + 0.75) * 150))


def test_a_pair_that_does_not_fail_is_a_user_error() -> None:
    with pytest.raises(UserError, match="a completing and a failing budget"):
        build.explain(build.Pair(TRACE, "dtr", FAIL, OK))


def test_a_control_that_differs_makes_the_intervention_invalid(found) -> None:
    pair = build.Pair(TRACE, "dtr", OK, FAIL)
    other = simulate(TRACE, OK)  # not the failing run: the control cannot reproduce it
    r = build._retention(pair, build.Runs(), other, "x1$", None)
    assert not r.valid
    assert "the intervention is invalid" in markdown.markdown(
        dataclasses.replace(found, retention=r)
    )


def test_a_given_control_stands_for_the_control_replay(found) -> None:
    # The pipeline gives the failing run's record: it must give the failure as a replay would.
    pair = build.Pair(TRACE, "dtr", OK, FAIL, peak=peak_memory(TRACE))
    recorded = build.explain(pair, control=simulate(TRACE, FAIL))
    assert recorded == found
    assert not build.explain(pair, control=simulate(TRACE, OK)).retention.valid


def test_resnet32_acceptance(load_named) -> None:
    # The study's development pair: DTR completes at 0.101 of peak and fails at 0.104.
    trace = load_named("resnet32")
    peak = peak_memory(trace)
    pair = build.Pair(trace, "dtr", int(peak * 0.101), int(peak * 0.104), peak=peak)
    found = build.explain(pair)
    assert found.ok.outcome == "ok" and found.fail.outcome == "oom"
    assert found.divergence.common_prefix > 0
    outermost = found.cascade.rebuilding[0]
    assert outermost.removed_by == "evict" and 0 < outermost.steps_before_failure <= 10
    retention = found.retention
    assert retention.storage == outermost.storage
    assert retention.retaining_completes and retention.valid
    # The study's worked example: x8976 evicted five steps before the failure needs it, a
    # cascade 117 deep (the study counts 118) with 889,795,480 bytes pinned, and retention's
    # overhead of 2.2406.
    m = found.mechanism
    assert (m.storage, m.removed_at_step, m.steps_until_failure) == ("x8976", 465, 5)
    assert (m.failure.depth, m.failure.pinned) == (117, 889_795_480)
    assert f"{m.retention.overhead:.4f}" == "2.2406"
    k, e = m.contrast, m.eviction
    assert (k.step, k.storage, e.runner_up) == (465, "x8195", "x8195")
    assert (e.rank, e.candidates) == (1, 133)
    text = m.text
    for named in ("x8976", "5 steps later", "117 rematerializations", "889,795,480", "2.2406"):
        assert named in text


def test_cli_writes_the_report_files(found, tmp_path, capsys) -> None:
    log = tmp_path / "tiny.log"
    log.write_text(random_trace_text(193, 12))
    args = ["explain", "--trace", str(log), "--ok-budget", str(OK), "--fail-budget", str(FAIL)]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    written = (tmp_path / "out" / "explain.json").read_text()
    assert written == json.dumps([types.to_json(found)], sort_keys=True) + "\n"
    assert types.from_json(json.loads(written)[0]).retention.storage == "x1$"
    assert (tmp_path / "out" / "pair-0.png").stat().st_size > 0
    assert main([*args[:3], "--ok-budget", str(FAIL), "--fail-budget", str(OK)]) == 2
    assert "expected a completing and a failing budget" in capsys.readouterr().err


def test_a_probe_of_a_run_without_decisions_lists_none() -> None:
    trace = tiny_trace(random_trace_text(3))
    _, events = simulate_events(trace, peak_memory(trace), candidates=(0, 30), top=5)
    assert not events.of("decision")
    assert decisions._decisions(events) == ()


def test_pairs_sharing_budgets_replay_each_once(found, monkeypatch) -> None:
    replayed = []
    wrapped = ((build.Pair, "record"), (build.Recording, "retained"), (build.Pair, "replay"))
    for owner, name in wrapped:
        original = getattr(owner, name)
        monkeypatch.setattr(
            owner, name, lambda self, *a, f=original, n=name: replayed.append(n) or f(self, *a)
        )
    pair = build.Pair(TRACE, "dtr", OK, FAIL, peak=peak_memory(TRACE))
    runs = build.Runs()
    first, again = build.explain(pair, runs=runs), build.explain(pair, runs=runs)
    assert first == again == found
    assert replayed == ["record", "record", "retained", "replay"]  # x1$ retained, the control
    runs.record(pair, FAIL + 1)  # a third budget: the least recently used one (OK) goes
    assert [key[-1] for key in runs.recorded] == [FAIL, FAIL + 1]


def test_a_pairs_centrality_is_what_its_replays_rank_by(monkeypatch) -> None:
    """The pipeline hands a TControlInspired pair the trace's cached ranking; computing it
    again in every explanation job took up to 90 s (LSTM)."""
    values = central.betweenness(TRACE, 20260926)

    def computed(*_):
        raise AssertionError("the betweenness was computed, not taken from the pair")

    monkeypatch.setattr(central, "betweenness", computed)
    pair = build.Pair(TRACE, "tcontrol-inspired", OK, FAIL, centrality=values)
    x = build.explain(pair)
    plain = simulate(TRACE, FAIL, "tcontrol-inspired", centrality=values)
    assert x.fail == build.summary(plain, None)
    assert x.retention.control_reproduces_failure


# The confirmed regions' edge brackets that the quick configuration (config/quick.yaml)
# explains: ResNet-32's development region and U-Net's two, each from below and from above.
QUICK_PAIRS = [
    ("resnet32", 1_016_179_144, 1_026_240_324),
    ("resnet32", 1_076_546_222, 1_066_485_042),
    ("unet", 3_551_452_799, 3_559_868_564),
    ("unet", 3_585_115_859, 3_576_700_094),
    ("unet", 3_627_194_683, 3_635_610_448),
    ("unet", 3_669_273_508, 3_660_857_743),
]


@pytest.mark.parametrize(("name", "ok", "fail"), QUICK_PAIRS)
def test_the_first_sentence_names_the_storage_its_steps_and_the_budget_difference(
    load_named, name: str, ok: int, fail: int
) -> None:
    trace = load_named(name)
    x = build.explain(build.Pair(trace, "dtr", ok, fail, peak=peak_memory(trace)))
    m, rebuilt = x.mechanism, x.cascade.rebuilding[0]
    assert (m.storage, m.removed_at_step) == (rebuilt.storage, rebuilt.evicted_at_step)
    assert m.steps_until_failure == rebuilt.steps_before_failure > 0
    first = m.text.split(". ")[0]
    assert f"{abs(fail - ok):,} bytes {'more' if fail > ok else 'less'}" in first
    assert f"evicts {m.storage} (" in first and f"at step {m.removed_at_step} " in first
    assert f"{m.steps_until_failure} steps later, when step {x.cascade.step}" in first
