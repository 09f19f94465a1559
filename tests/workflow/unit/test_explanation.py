"""An explanation's one JSON form: what the types write they read back, key for key."""

from __future__ import annotations

import dataclasses
import json

import pytest

from dtrholes.explain import build, markdown, types
from dtrholes.explain.types import ExplanationError
from simulator import peak_memory
from tests.support.tracegen import random_trace_text, tiny_trace

TRACE = tiny_trace(random_trace_text(193, 12))  # the hand-traced hole of test_explain


@pytest.fixture(scope="module")
def tiny() -> types.Explanation:
    return build.explain(build.Pair(TRACE, "dtr", 377, 378, peak=peak_memory(TRACE)))


@pytest.fixture(scope="module")
def resnet32(load_named) -> types.Explanation:
    # The study's development pair: DTR completes at 0.101 of peak and fails at 0.104.
    trace = load_named("resnet32")
    peak = peak_memory(trace)
    pair = build.Pair(trace, "dtr", int(peak * 0.101), int(peak * 0.104), peak=peak)
    return build.explain(pair)


def written(x: types.Explanation) -> str:
    """The bytes `dtr-holes explain` writes for one pair (files.write_json, indent=None)."""
    return json.dumps([types.to_json(x)], sort_keys=True) + "\n"


@pytest.mark.parametrize("name", ["tiny", "resnet32"])
def test_the_json_reads_back_to_the_same_explanation_and_bytes(name: str, request) -> None:
    x = request.getfixturevalue(name)
    assert types.from_json(types.to_json(x)) == x
    text = written(x)
    (read,) = (types.from_json(pair) for pair in json.loads(text))
    assert read == x and written(read) == text
    assert markdown.markdown(read) == markdown.markdown(x)


def test_the_json_keeps_the_keys_of_its_parts(tiny) -> None:
    # Renaming a field changes every explanation file: these are the keys the files have.
    x = types.to_json(tiny)
    keys = {
        "": x,
        "mechanism": x["mechanism"],
        "mechanism.eviction": x["mechanism"]["eviction"],
        "decisive": x["decisive"],
        "cascade.rebuilding": x["cascade"]["rebuilding"][0],
        "probe.fail.steps": x["probe"]["fail"]["steps"][-1],
        "retention": x["retention"],
    }
    assert {part: " ".join(sorted(value)) for part, value in keys.items()} == {
        "": "cascade decisive divergence fail mechanism ok overhead_cap params peak_memory"
        " policy probe retention trace trace_sha256",
        "mechanism": "budget_difference contrast eviction failure needed_at_step removed_at_step"
        " removed_by retention size steps_until_failure storage text",
        "mechanism.eviction": "candidates completing_evicted completing_freed"
        " completing_shortfall rank runner_up runner_up_score score shortfall step",
        "decisive": "completing_at_eviction contrast eviction failing_at_contrast needed_at_step"
        " ok_holds_it removed_at_step removed_by size storage",
        "cascade.rebuilding": "depth evicted_at_step evicted_by_decision"
        " ok_run_first_evicted_at_step op removed_by size steps_before_failure storage",
        "probe.fail.steps": "depth evicted failed remats step",
        "retention": "control control_reproduces_failure intervention retaining_completes"
        " storage valid",
    }
    assert "failed" not in x["probe"]["ok"]["steps"][-1]  # only a failing step has the key
    cited = dataclasses.replace(tiny, cites=types.Citations(ok="a", fail="b"))
    assert types.to_json(cited)["cites"] == {"ok": "a", "fail": "b"} and "cites" not in x


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda x: x.pop("probe"), "explanation: expected a key 'probe', found none"),
        (lambda x: x.update(extra=1), "explanation: expected the keys of Explanation, found"),
        (
            lambda x: x["ok"].update(evictions=True),
            "explanation.ok.evictions: expected an integer, found True",
        ),
        (
            lambda x: x["decisive"]["eviction"]["top"][1].update(score=None),
            "explanation.decisive.eviction.top[1].score: expected a number or a string, found",
        ),
        (
            lambda x: x["cascade"].update(rebuilding={}),
            "explanation.cascade.rebuilding: expected a list, found {}",
        ),
        (lambda x: x.update(params=[]), "explanation.params: expected an object, found []"),
    ],
)
def test_json_out_of_shape_names_the_part(tiny, edit, message: str) -> None:
    x = json.loads(json.dumps(types.to_json(tiny)))
    edit(x)
    with pytest.raises(ExplanationError) as raised:
        types.from_json(x)
    assert str(raised.value).startswith(message)


def test_a_score_may_be_infinite_and_a_ratio_an_integer(tiny) -> None:
    x = types.to_json(tiny)
    x["decisive"]["eviction"]["top"][0]["score"] = "inf"
    x["ok"]["ratio"] = 1
    read = types.from_json(x)
    assert read.decisive.eviction.top[0].score == "inf" and read.ok.ratio == 1
    assert types.to_json(read) == x
