"""The audit of a completed tiny scenario: it passes untouched and fails, naming the record and
the check, after each kind of tampering."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dtrholes.holes import maps
from dtrholes.study import plan
from dtrholes.traces import fetch
from tests.support.auditing import audit, failures
from tests.support.scenario import copy_of

TRACE = "resnet32"


def assert_fails(report: dict, check: str, run_id: str) -> None:
    named = [f for f in failures(report, check) if run_id in f]
    assert named, (check, run_id, json.dumps(report, indent=1))


def region_record(directory: Path, key: str = "first_fail") -> Path:
    """The record of the DTR region's bracket that the audit reruns: the first sampled one at
    its budget in the records table (Stage C may have drawn a Stage B budget too)."""
    repeats = json.loads((directory / "results" / "repeats" / TRACE / "dtr.json").read_text())
    budget = repeats["regions"][0][key]
    for row in pq.read_table(directory / "results" / "records.parquet").to_pylist():
        if (row["budget"], row["policy"]) == (budget, "dtr") and plan.is_sample(row["stage"]):
            return directory / "results" / "records" / f"{row['run_id']}.json"
    raise AssertionError(f"no sampled record at {budget}")


def test_untampered_run_passes_and_lists_every_execution(
    completed: Path, tmp_path: Path, capsys
) -> None:
    # The pipeline's last rule ran the audit already; rerun it to read its report here.
    assert (completed / "results" / "audit" / "audit.md").is_file()
    status, report, printed = audit(completed, capsys, tmp_path)
    assert status == 0 and report["passed"], printed
    assert {c["name"] for c in report["checks"]} == {
        "records",
        "provenance",
        "claims",
        "re-execution",
        "maps",
        "explanations",
        "evidence",
    }
    rerun = next(c for c in report["checks"] if c["name"] == "re-execution")
    assert rerun["count"] > 20  # the edge points besides the sample of 20
    assert f"re-execution: {rerun['count']:,} of {rerun['count']:,} records rerun" in printed
    assert "maps: passed" in printed and printed.endswith(" s\n")
    evidence = (tmp_path / "e.csv").read_text().splitlines()
    assert len(evidence) - 1 == len(list((completed / "results" / "records").iterdir()))


def test_an_edited_map_tile_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    path = copy / "results" / "maps" / TRACE / "dtr.parquet"
    m = maps.read(path)
    flipped = [dataclasses.replace(t, outcome="ok") if t.outcome == "oom" else t for t in m.tiles]
    maps.write(dataclasses.replace(m, tiles=tuple(flipped)), path)
    status, report, _ = audit(copy, capsys, tmp_path)
    failed = {c["name"] for c in report["checks"] if not c["passed"]}
    assert status == 1 and failed == {"maps", "claims"}  # the maps tables differ from the map's


def test_an_edited_explanation_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    path = copy / "results" / "explain" / TRACE / "dtr" / "explain.json"
    pairs = json.loads(path.read_text())
    pairs[0]["fail"]["evictions"] += 1
    path.write_text(json.dumps(pairs))
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert_fails(report, "explanations", pairs[0]["cites"]["fail"])


def test_an_edited_mechanism_summary_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    path = copy / "results" / "explain" / TRACE / "dtr" / "explain.json"
    pairs = json.loads(path.read_text())
    pairs[1]["mechanism"]["budget_difference"] += 1
    path.write_text(json.dumps(pairs))
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert_fails(report, "explanations", "pair 1")


def test_a_deleted_record_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    path = region_record(copy)
    path.unlink()
    status, report, printed = audit(copy, capsys, tmp_path)
    assert status == 1 and "records FAILED" in printed
    assert_fails(report, "records", path.stem)


def test_an_edited_outcome_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    path = region_record(copy, "last_fail")
    record = json.loads(path.read_text())
    assert record["result"]["outcome"] == "oom"
    record["result"]["outcome"] = "ok"
    path.write_text(json.dumps(record, sort_keys=True, indent=1) + "\n")
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert_fails(report, "claims", path.stem)  # the records table says oom
    assert_fails(report, "re-execution", path.stem)  # a region edge point: always rerun
    status, parallel, _ = audit(copy, capsys, tmp_path, "--workers", "2")
    assert status == 1
    assert failures(parallel, "re-execution") == failures(report, "re-execution")


def test_repeats_sharing_a_process_fail(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    budget = json.loads((copy / "results" / "repeats" / TRACE / "dtr.json").read_text())
    budget = budget["regions"][0]["first_fail"]
    paths = [
        path
        for path in sorted((copy / "results" / "records").glob("*.json"))
        if (r := json.loads(path.read_text()))["stage"] == "repeat"
        and (r["budget"], r["policy"]["name"]) == (budget, "dtr")
    ]
    first, second = (json.loads(path.read_text()) for path in paths[:2])
    assert first["pid"] != second["pid"]
    second["pid"] = first["pid"]
    paths[1].write_text(json.dumps(second, sort_keys=True, indent=1) + "\n")
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert_fails(report, "provenance", paths[1].stem)


def test_an_edited_trace_byte_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    archive = copy / "data" / fetch.ARCHIVE_NAME
    member = fetch.find_entry(TRACE, copy / "config" / "traces.tsv").member
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(archive) as old, zipfile.ZipFile(edited, "w") as new:
        for info in old.infolist():
            data = old.read(info)
            if info.filename == member:  # one tensor one byte larger
                data = data.replace(b'"MEMORY":"1728"', b'"MEMORY":"1729"', 1)
            new.writestr(info, data)
    shutil.move(edited, archive)
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    some_record = region_record(copy).stem
    assert_fails(report, "re-execution", some_record)
    assert any("sha256" in f and "record" in f for f in failures(report, "provenance"))


def test_a_duplicated_record_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    path = region_record(copy)
    shutil.copy(path, path.with_name("0" * 32 + ".json"))
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert_fails(report, "records", path.stem)
    assert any("duplicate" in f for f in failures(report, "records"))


def test_a_truncated_record_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    path = region_record(copy)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert any(path.stem in f and "truncated" in f for f in failures(report, "records"))


def test_a_truncated_table_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    table = copy / "results" / "tables" / "holes.parquet"
    table.write_bytes(table.read_bytes()[:100])
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert any("holes" in f for f in failures(report, "claims"))


def test_an_edited_comparison_with_the_study_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    table = copy / "results" / "tables" / "paper.parquet"
    rows = pq.read_table(table)
    verdicts = rows.column("verdict").to_pylist()
    assert "agree" in verdicts  # the scenario's development points are the study's
    edited = ["differs" if v == "agree" else v for v in verdicts]
    pq.write_table(rows.set_column(rows.column_names.index("verdict"), "verdict", [edited]), table)
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    assert any("tables/paper.parquet" in f and "verdict" in f for f in failures(report, "claims"))
    markdown = copy / "results" / "tables" / "paper.md"
    markdown.write_text(markdown.read_text().replace("agree", "disagree", 1))
    shutil.copy(completed / "results" / "tables" / "paper.parquet", table)
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1 and any("tables/paper.md" in f for f in failures(report, "claims"))


def test_an_edited_maps_table_fails(completed: Path, tmp_path: Path, capsys) -> None:
    copy = copy_of(completed, tmp_path)
    markdown = copy / "results" / "tables" / "maps.md"
    text = markdown.read_text()
    count = int(re.search(r"not monotone: (\d+) holes", text).group(1))
    markdown.write_text(text.replace(f"{count} holes", f"{count - 1} holes", 1))
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1 and any("tables/maps.md" in f for f in failures(report, "claims"))


@pytest.mark.parametrize("table, column", [("map-holes", "width"), ("maps", "widest_hole")])
def test_an_edited_hole_width_fails(
    completed: Path, tmp_path: Path, capsys, table: str, column: str
) -> None:
    copy = copy_of(completed, tmp_path)
    path = copy / "results" / "tables" / f"{table}.parquet"
    rows = pq.read_table(path)
    widths = rows.column(column).to_pylist()
    edited = [widths[0] - 1, *widths[1:]]
    pq.write_table(rows.set_column(rows.column_names.index(column), column, [edited]), path)
    status, report, _ = audit(copy, capsys, tmp_path)
    assert status == 1
    named = [f for f in failures(report, "claims") if f"tables/{table}.parquet" in f]
    assert named and column in named[0], failures(report, "claims")


def unsampled_record(directory: Path, output: str, wanted: str) -> Path:
    """A record that a job output (or map) lists, whose run ended `wanted`, and that the
    audit does not rerun: a field only its file holds is checked by its sha256 alone."""
    results = directory / "results"
    rerun = set(json.loads((results / "audit" / "audit.json").read_text())["rerun"])
    if output.endswith(".parquet"):
        listed = pq.read_table(results / output, columns=["run_id"]).column("run_id").to_pylist()
    else:
        listed = json.loads((results / output).read_text())["run_ids"]
    for run_id in listed:
        path = results / "records" / f"{run_id}.json"
        result = json.loads(path.read_text())["result"]
        if run_id and run_id not in rerun and result and result["outcome"] == wanted:
            return path
    raise AssertionError(f"no {wanted} record outside the rerun sample in {output}")


@pytest.mark.parametrize(
    "output, wanted, field",
    [
        (f"stage_a/{TRACE}/nbhd-penalty/job0.json", "ok", "remat_compute"),
        (f"edges/{TRACE}/dtr.json", "oom", "heuristic_evals"),
        (f"maps/{TRACE}/dtr.parquet", "oom", "failure"),
    ],
)
def test_a_field_no_table_carries_edited_in_an_unsampled_record_fails(
    completed: Path, tmp_path: Path, capsys, output: str, wanted: str, field: str
) -> None:
    copy = copy_of(completed, tmp_path)
    path = unsampled_record(copy, output, wanted)
    record = json.loads(path.read_text())
    if field == "failure":
        record["result"]["failure"]["pinned"] += 1
    else:
        record["result"][field] += 1
    path.write_text(json.dumps(record, sort_keys=True, indent=1) + "\n")
    status, report, printed = audit(copy, capsys, tmp_path)
    assert status == 1 and path.stem not in report["rerun"]
    named = [f for f in failures(report, "records") if path.stem in f]
    assert named and f"records/{path.name}" in named[0] and f"{output} states" in named[0], printed


def test_job_outputs_from_before_checksums_say_how_to_rebuild_them(
    completed: Path, tmp_path: Path, capsys
) -> None:
    copy = copy_of(completed, tmp_path)
    edges = copy / "results" / "edges" / TRACE / "dtr.json"
    older = json.loads(edges.read_text())
    del older["record_sha256"]
    edges.write_text(json.dumps(older, sort_keys=True, indent=1) + "\n")
    path = copy / "results" / "maps" / TRACE / "dtr.parquet"
    maps.write(dataclasses.replace(maps.read(path), record_sha256=None), path)
    status, report, printed = audit(copy, capsys, tmp_path)
    assert status == 1 and "Traceback" not in printed
    found = failures(report, "records")
    for output, rule in ((edges, "find_edges"), (path, "map_chunk")):
        rel = str(output.relative_to(copy / "results"))
        named = [f for f in found if rel in f and "before job outputs stated" in f]
        assert named and f"snakemake --forcerun {rule}" in named[0], found
