"""A trace of your own joins a completed run through the trace sheet and one switch: it runs the
broader sweep's stages (nothing of the study's traces reruns), its records name its origin, and
the audit re-reads its file."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

from dtrholes.traces import fetch, recost
from tests.support.auditing import audit, failures
from tests.support.scenario import copy_of, planned, planned_outputs, snakemake

RECIPE = "lognormal:0.01:1"


def add_own_trace(directory: Path) -> str:
    """ResNet-32 with its costs perturbed, written as a file of the scenario's own and listed
    in its sheet with role own; its sha256."""
    sheet = directory / "config" / "traces.tsv"
    member = fetch.find_entry("resnet32", sheet).member
    data = zipfile.ZipFile(directory / "data" / fetch.ARCHIVE_NAME).read(member)
    made = recost.recost(data, "resnet32", recost.Recipe.parse(RECIPE))
    (directory / "traces").mkdir()
    (directory / "traces" / "mine.log").write_bytes(made)
    digest = hashlib.sha256(made).hexdigest()
    with sheet.open("a") as f:
        f.write(f"mine\ttraces/mine.log\t{digest}\town\tResNet-32, noisy costs\n")
    return digest


def test_an_own_trace_runs_the_broad_stages_and_is_audited(
    completed: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    copy = copy_of(completed, tmp_path)
    digest = add_own_trace(copy)
    assert planned(snakemake(copy, "-n")) == {}  # without the switch nothing changes
    dry = snakemake(copy, "-n", "--config", "own=True")
    assert planned(dry)["sweep_stage"] == 6  # A: 2 jobs, C: 1 job, for each of both policies
    swept = planned_outputs(dry, "sweep_stage")
    assert all("/mine/" in path for path in swept), swept
    assert not any("/resnet32/" in p for p in planned_outputs(dry, "find_edges"))
    assert "results/figures/maps-mine.pdf" in dry  # with the scenario's maps: true
    snakemake(copy, "--config", "own=True", "maps=False")  # (maps run as the study's do)

    mine = [
        json.loads(p.read_text())
        for p in (copy / "results" / "records").glob("*.json")
        if json.loads(p.read_text())["trace"]["name"] == "mine"
    ]
    assert {r["stage"] for r in mine} >= {"A", "C"}
    assert {r["policy"]["name"] for r in mine} == {"dtr", "nbhd-penalty"}
    resnet32 = fetch.find_entry("resnet32", copy / "config" / "traces.tsv").sha256
    told = {"recost": {"from": resnet32, "recipe": RECIPE}}
    assert all(r["trace"]["file"] == "traces/mine.log" for r in mine)
    assert all(r["trace"]["provenance"] == told for r in mine)
    assert all(r["trace"]["sha256"] == digest for r in mine)
    assert "| mine |" in (copy / "results" / "tables" / "holes.md").read_text()

    monkeypatch.chdir(copy)  # the sheet's paths are the working directory's, as the pipeline's
    status, _, printed = audit(copy, capsys, tmp_path, "--sample", "all")
    assert status == 0, printed
    record = next(
        p
        for p in (copy / "results" / "records").glob("*.json")
        if json.loads(p.read_text())["trace"]["name"] == "mine"
    )
    kept = record.read_text()
    record.write_text(kept.replace('"lognormal:0.01:1"', '"lognormal:0.2:1"'))
    status, report, _ = audit(copy, capsys, tmp_path, "--sample", "all")
    assert status == 1
    assert any("trace mine's origin" in f for f in failures(report, "provenance"))
    record.write_text(kept)
    mine_file = copy / "traces" / "mine.log"
    mine_file.write_bytes(mine_file.read_bytes().replace(b'"MEMORY":"1728"', b'"MEMORY":"1729"', 1))
    status, report, _ = audit(copy, capsys, tmp_path, "--sample", "all")
    assert status == 1
    rerun = failures(report, "re-execution")
    assert rerun and all("trace mine is not the one on file" in f for f in rerun), rerun[:3]
    found = failures(report, "provenance")
    assert any("traces/mine.log" in f and digest in f for f in found), found[:3]
