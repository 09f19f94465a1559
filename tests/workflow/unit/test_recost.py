"""`dtr-holes recost`: perturbed operator costs, everything else of the trace kept."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dtrholes.cli import main
from dtrholes.traces import fetch, recost
from simulator import peak_memory
from simulator.trace import CALL_OP, MUTATE_OP, parse_trace, provenance
from tests.support.archive import entry


@pytest.fixture(scope="module")
def unet(archive: Path) -> bytes:
    return zipfile.ZipFile(archive).read(entry("unet").member)


def made(data: bytes, recipe: str):
    return parse_trace(recost.recost(data, "unet", recost.Recipe.parse(recipe)), "unet")


def without_times(data: bytes) -> list[dict]:
    lines = [json.loads(x) for x in data.decode().splitlines()]
    for obj in lines:
        obj.pop("TIME", None)
    return [x for x in lines if x.get("ANNOTATION") != "PROVENANCE"]


def test_only_costs_change(unet):
    noisy = recost.recost(unet, "unet", recost.Recipe.parse("lognormal:0.2:7"))
    assert without_times(noisy) == without_times(unet)
    a, b = parse_trace(unet, "unet"), parse_trace(noisy, "unet")
    assert peak_memory(a) == peak_memory(b)
    assert np.array_equal(a.cmd_kind, b.cmd_kind) and np.array_equal(a.cmd_arg, b.cmd_arg)
    assert provenance(noisy) == {
        "recost": {"from": hashlib.sha256(unet).hexdigest(), "recipe": "lognormal:0.2:7"}
    }


def test_lognormal_is_seeded_and_has_its_sigma(unet):
    one, again = made(unet, "lognormal:0.2:7"), made(unet, "lognormal:0.2:7")
    assert np.array_equal(one.op_cost, again.op_cost)
    assert not np.array_equal(one.op_cost, made(unet, "lognormal:0.2:8").op_cost)
    base = parse_trace(unet, "unet")
    timed = (base.op_kind != 1) & (base.op_cost > 1000)  # large costs: rounding is negligible
    logs = np.log(one.op_cost[timed] / base.op_cost[timed])
    assert len(logs) > 100
    assert abs(logs.std() - 0.2) < 0.03 and abs(logs.mean()) < 0.03
    assert np.array_equal(made(unet, "lognormal:0:1").op_cost, base.op_cost)


def test_uniform_and_size(unet):
    base = parse_trace(unet, "unet")
    timed = (base.op_kind == CALL_OP) | (base.op_kind == MUTATE_OP)
    uniform = made(unet, "uniform")
    assert set(uniform.op_cost[timed]) == {round(base.op_cost[timed].mean())}
    assert set(uniform.op_cost[~timed]) == {0}
    size = made(unet, "size")
    for op in np.flatnonzero(timed):
        allocated = base.tensor_size[base.op_out_ptr[op] : base.op_out_ptr[op + 1]].sum()
        assert size.op_cost[op] == max(allocated, 1)


def test_a_recost_of_a_recost_keeps_the_first_provenance(unet):
    once = recost.recost(unet, "unet", recost.Recipe.parse("uniform"))
    twice = recost.recost(once, "once", recost.Recipe.parse("size"))
    given = provenance(twice)
    assert given["recost"]["recipe"] == "size"
    assert given["original"]["recost"]["recipe"] == "uniform"


def test_cli_writes_the_trace_and_its_sheet_row(tmp_path, capsys, monkeypatch, archive, unet):
    monkeypatch.setenv(fetch.DATA_ENV, str(tmp_path / "data"))
    source = tmp_path / "unet.log"
    source.write_bytes(unet)
    out = tmp_path / "noisy.log"
    assert main(["recost", "--trace", str(source), "--recipe", "size", "--out", str(out)]) == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() in capsys.readouterr().out
    named = ["recost", "--trace", "unet", "--recipe", "uniform", "--archive", str(archive)]
    assert main([*named, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "recost:unet:uniform\t" + hashlib.sha256(out.read_bytes()).hexdigest() in printed


@pytest.mark.parametrize("bad", ["gauss", "lognormal:0.1", "lognormal:x:1", "uniform:1"])
def test_cli_bad_recipe_is_one_line(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as caught:
        main(["recost", "--trace", "x.log", "--recipe", bad, "--out", str(tmp_path / "o.log")])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "expected lognormal:<sigma>:<seed>, uniform or size" in err
    assert len(err.splitlines()) == 1
