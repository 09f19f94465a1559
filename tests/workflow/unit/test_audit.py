"""The audit's checks on hand-made records: files, requests, replays, differences, evidence."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from dtrholes import audit
from dtrholes.audit import claims, inventory, record_files, reexecution
from dtrholes.explain import build, types
from dtrholes.study import records
from dtrholes.study.records import Request, Usage
from simulator import UserError, get_policy, simulate
from tests.support.tracegen import random_trace_text, tiny_trace

TRACE = tiny_trace(random_trace_text(3))
USAGE = Usage("2026-11-29T00:00:00+00:00", "2026-11-29T00:00:01+00:00", 1.0, 0.9, 1024)
OUTPUT = "stage_a/tiny/dtr/job0.json"


def make(budget: int, version: str = "v2", stage: str = "A") -> dict:
    request = Request(
        TRACE.name,
        TRACE.sha256,
        "dtr",
        get_policy("dtr").resolve(None),
        budget,
        stage=stage,
        protocol_version=version,
    )
    record = records.make_record(request, USAGE, simulate(TRACE, budget, "dtr"))
    return json.loads(json.dumps(record))


def loaded(
    directory: Path, outputs: dict[str, list[str]], sha256: dict | None = None
) -> audit.Context:
    """A context whose job outputs list `outputs` and state `sha256` of their records
    (default: that of each listed file as it is now)."""
    files = inventory.scan(directory)
    canonical = {f.record["run_id"]: f.record for f in files if f.canonical}
    if sha256 is None:
        on_file = {p.stem for p in directory.glob("*.json")}
        sha256 = {
            rel: records.checksums(directory, [i for i in ids if i in on_file])
            for rel, ids in outputs.items()
        }
    inv = inventory.Inventory(
        directory.parent, files, canonical, outputs, {}, {}, {}, sha256=sha256
    )
    options = audit.Options(directory.parent, directory.parent, Path("sheet.tsv"))
    return audit.Context(options, inv, {})


def failures(check: audit.Check) -> list[str]:
    return [str(f) for f in check.failures]


def test_valid_listed_records_pass(tmp_path: Path) -> None:
    written = [records.write_record(make(b), tmp_path / "records") for b in (150, 160)]
    check = audit.check_records(loaded(tmp_path / "records", {OUTPUT: [p.stem for p in written]}))
    assert check.passed and check.count == 2


def test_each_kind_of_damage_names_the_record(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    kept, truncated, copied, edited, gone = (
        records.write_record(make(b), folder) for b in (150, 160, 170, 180, 190)
    )
    truncated.write_text(truncated.read_text()[:50])
    shutil.copy(copied, folder / ("0" * 32 + ".json"))
    record = json.loads(edited.read_text())
    record["budget"] += 1  # a request edited after the run: its run id no longer fits
    edited.write_text(json.dumps(record))
    gone.unlink()
    ids = [p.stem for p in (kept, truncated, copied, edited, gone)]
    found = failures(audit.check_records(loaded(folder, {OUTPUT: ids})))
    assert any(truncated.stem in f and "truncated" in f for f in found)
    assert any(copied.stem in f and "duplicate under another name" in f for f in found)
    assert any(copied.stem in f and "duplicate run id" in f for f in found)
    assert any(edited.stem in f and "not the hash of its request" in f for f in found)
    assert any(gone.stem in f and "missing" in f for f in found)
    assert all(f.startswith("records: record ") for f in found)
    assert not any(kept.stem in f for f in found)


def test_a_record_edited_after_its_job_output_names_the_file_and_the_output(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "records"
    kept, edited = (records.write_record(make(b), folder) for b in (150, 160))
    stated = {OUTPUT: records.checksums(folder, [kept.stem, edited.stem])}
    record = json.loads(edited.read_text())
    record["result"]["remat_compute"] += 1  # a field no table carries
    edited.write_text(json.dumps(record, sort_keys=True, indent=1) + "\n")
    found = failures(
        audit.check_records(loaded(folder, {OUTPUT: [kept.stem, edited.stem]}, stated))
    )
    assert len(found) == 1 and found[0].startswith(f"records: record {edited.stem}: ")
    assert f"records/{edited.stem}.json has sha256" in found[0] and f"{OUTPUT} states" in found[0]


def test_a_job_output_without_checksums_says_how_to_rebuild_it(tmp_path: Path) -> None:
    path = records.write_record(make(150), tmp_path / "records")
    check = audit.check_records(loaded(tmp_path / "records", {OUTPUT: [path.stem]}, {OUTPUT: None}))
    assert failures(check) == [
        f"records: {OUTPUT}: written before job outputs stated their records' sha256: rebuild it"
        " from its records (none is rerun) with `snakemake --forcerun sweep_stage`"
    ]


def test_all_reruns_every_cited_record_maps_included(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    listed, mapped = (
        [records.write_record(make(b), folder).stem for b in bs] for bs in ((150, 160), (170,))
    )
    ctx = loaded(folder, {OUTPUT: listed})
    ctx = dataclasses.replace(
        ctx, inv=dataclasses.replace(ctx.inv, maps={"maps/tiny/dtr.parquet": mapped})
    )
    every = dataclasses.replace(ctx, options=dataclasses.replace(ctx.options, sample=None))
    assert audit.sample(every) == (sorted(listed + mapped), [])
    one = dataclasses.replace(ctx, options=dataclasses.replace(ctx.options, sample=1))
    assert len(audit.sample(one)[0]) == 1 and set(audit.sample(one)[0]) <= set(listed)


EXPLAINED = tiny_trace(random_trace_text(193, 12))  # the explained hole of test_explain


@pytest.fixture(scope="module")
def explained() -> types.Explanation:
    return build.explain(build.Pair(EXPLAINED, "dtr", 377, 378))


def write_explanations(results: Path, pairs: list) -> Path:
    path = results / "explain" / "tiny" / "dtr" / "explain.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(pairs))
    return path


def test_an_explanation_citing_an_unlisted_record_fails(tmp_path: Path, explained) -> None:
    run_id = records.write_record(make(150), tmp_path / "records").stem
    cites = types.Citations(ok=run_id, fail=run_id)
    write_explanations(tmp_path, [types.to_json(dataclasses.replace(explained, cites=cites))])
    found = failures(audit.check_explanations(loaded(tmp_path / "records", {OUTPUT: []})))
    assert found[0] == (
        "explanations: explain/tiny/dtr/explain.json: pair 0: the ok run cites"
        f" {run_id}, which no current job output lists"
    )


def test_an_explanation_out_of_shape_fails_and_names_the_part(tmp_path: Path, explained) -> None:
    pair = types.to_json(explained)
    pair["divergence"]["ok"]["step"] = "four"
    del pair["cascade"]["rebuilding"][0]["depth"]
    write_explanations(tmp_path, [{"cites": {"ok": "a", "fail": "b"}}, pair])
    found = failures(audit.check_explanations(loaded(tmp_path / "records", {OUTPUT: []})))
    where = "explanations: explain/tiny/dtr/explain.json: pair"
    assert found == [
        f"{where} 0: it is out of shape: explanation: expected a key 'mechanism', found none",
        f"{where} 1: it is out of shape: explanation.divergence.ok.step: expected an integer,"
        " found 'four'",
    ]


def test_a_record_listed_by_another_stage_is_misfiled(tmp_path: Path) -> None:
    path = records.write_record(make(150, stage="B"), tmp_path / "records")
    found = failures(audit.check_records(loaded(tmp_path / "records", {OUTPUT: [path.stem]})))
    assert found == [f"records: record {path.stem}: listed by {OUTPUT} but a B/tiny/dtr run"]


def test_a_result_of_another_request_is_caught() -> None:
    record = make(150)
    record["result"] = make(160)["result"]
    assert "answers another request (budget)" in record_files._request_problem(record)


def test_replay_answers_from_records_and_names_a_missing_one() -> None:
    record = make(150)
    replay = claims.Replay({record["run_id"]: record})
    assert replay.run(records.request_of(record))[0].to_dict() == record["result"]
    other = records.request_of(make(160))
    with pytest.raises(claims.MissingRecord, match=other.run_id):
        replay.run(other)


def test_difference_finds_the_first_differing_path() -> None:
    assert claims.difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]}) is None
    assert claims.difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == ("/a/1/b", 2, 3)
    assert claims.difference([1, 2], [1]) == ("/", [1, 2], [1])
    assert claims.difference({"x": True}, {"x": 1}) == ("/x", True, 1)


def test_the_latest_render_extends_every_other() -> None:
    one = {"version": "a", "history": [{"id": "x"}]}
    two = {"version": "b", "history": [{"id": "x"}, {"id": "y"}]}
    assert inventory.latest({"a": one, "b": two}) is two
    other = {"version": "c", "history": [{"id": "z"}, {"id": "w"}]}
    with pytest.raises(UserError, match="diverging"):
        inventory.latest({"a": one, "b": two, "c": other})


def test_evidence_lists_every_file_with_its_status(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    current, older, unlisted = (
        records.write_record(make(b, version), folder)
        for b, version in ((150, "v2"), (160, "v1"), (170, "v2"))
    )
    shutil.copy(current, folder / ("0" * 32 + ".json"))
    (folder / f".{'e' * 32}.json.x1y2.part").write_text("{")  # a write cut short
    cited = {current.stem: [OUTPUT], "f" * 32: [OUTPUT]}
    rows = {
        r["run_id"] + r["status"]: r for r in inventory.rows(inventory.scan(folder), cited, "v2")
    }
    assert rows[current.stem + "current"]["cited_by"] == OUTPUT
    assert "protocol version v1" in rows[older.stem + "superseded"]["reason"]
    assert "older plan" in rows[unlisted.stem + "superseded"]["reason"]
    assert "a copy of record" in rows[current.stem + "excluded"]["reason"]
    assert "interrupted write" in rows["e" * 32 + "excluded"]["reason"]
    assert rows["f" * 32 + "missing"]["cited_by"] == OUTPUT
    inventory.write_csv(list(rows.values()), tmp_path / "evidence.csv")
    assert len((tmp_path / "evidence.csv").read_text().splitlines()) == 1 + 6


def test_an_edge_is_bounded_by_runs_ending_as_under_the_samples_cap() -> None:
    """A probe that thrashed under a lower cap shares the edge's bound but is not its run."""
    settled = {"run_id": "full", "overhead_cap": 60, "result": {"outcome": "thrashed"}}
    probe = {"run_id": "probe", "overhead_cap": 4, "result": {"outcome": "thrashed"}}
    below = {"run_id": "ok", "overhead_cap": 4, "result": {"outcome": "ok", "budget_hi": 99}}
    below["result"]["budget"] = 90
    below["result"]["budget_lo"] = 80
    for r in (settled, probe):
        r["result"].update(budget=100, budget_lo=100, budget_hi=120)
    edge = {"below": 99, "above": 100, "outcome_below": "ok", "outcome_above": "thrashed"}
    assert reexecution._bounding([probe, below, settled], edge, 60) == ["ok", "full"]


def test_an_explanations_mechanism_must_be_what_its_parts_give(explained) -> None:
    pair = types.from_json(json.loads(json.dumps(types.to_json(explained))))
    assert audit.mechanism_problem(pair) is None
    text = pair.mechanism.text.replace("x1$", "x2", 1)
    edited = dataclasses.replace(pair, mechanism=dataclasses.replace(pair.mechanism, text=text))
    assert "mechanism summary" in audit.mechanism_problem(edited)
    richer = dataclasses.replace(pair, ok=dataclasses.replace(pair.ok, budget=pair.ok.budget - 10))
    assert audit.mechanism_problem(richer) is not None  # the budget difference changed
    unfit = dataclasses.replace(pair, decisive=dataclasses.replace(pair.decisive, size=None))
    assert "cannot be derived" in audit.mechanism_problem(unfit)  # of its type, yet no number
