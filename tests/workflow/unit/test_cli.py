"""The `dtr-holes` command line: results as JSON or text, and user errors as one line, exit 2."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dtrholes.cli import main, parser
from simulator import read_trace, simulate
from tests.support.logs import chain_lines, j, write
from tests.support.tracegen import random_trace_text

CONSOLE_SCRIPT = Path(sys.executable).with_name("dtr-holes")
RESULT_KEYS = {"outcome", "overhead", "clock", "evictions", "eviction_seq_sha256"}
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def reuse_lines() -> list[str]:
    """The chain plus a 1-byte `y` from x0 and x5: at budget 201, x0 must be recomputed for it."""
    lines = chain_lines()
    call = j(INSTRUCTION="CALL", RESULT=["y"], NAME="op", ARGS=["x0", "x5"], TIME="10")
    tail = [
        j(INSTRUCTION="MEMORY", NAME="y", MEMORY="1"),
        j(INSTRUCTION="ALIAS", NAME="y", ALIAS="-1"),
    ]
    return lines[:-5] + [call, *tail] + lines[-5:]


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    return write(tmp_path / "chain.log", chain_lines())


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["simulate", *argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert len(out.strip().splitlines()) == 1
    return json.loads(out)


def run_failing(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must fail with a user error; return its single stderr line."""
    assert main(["simulate", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dtr-holes: "), err
    return lines[0]


def test_json_tight_budget_is_oom(chain: Path, capsys) -> None:
    result = run_json(capsys, "--trace", str(chain), "--budget", "150")
    assert result.keys() >= RESULT_KEYS
    assert result["outcome"] == "oom"
    assert result["evictions"] == 0 and result["eviction_seq_sha256"] == EMPTY_SHA256
    assert result["budget"] == 150 and result["failure"] is not None


def test_json_budget_forcing_evictions_completes(chain: Path, capsys) -> None:
    result = run_json(capsys, "--trace", str(chain), "--budget", "200")
    assert result["outcome"] == "ok"
    assert (result["clock"], result["overhead"], result["evictions"]) == (61, 1.0, 4)
    assert result["eviction_seq_sha256"] == hashlib.sha256(b"x0\nx1\nx2\nx3").hexdigest()
    assert result["failure"] is None


def test_json_loose_budget_completes_without_evictions(chain: Path, capsys) -> None:
    result = run_json(capsys, "--trace", str(chain), "--budget", str(10**9))
    assert (result["outcome"], result["evictions"], result["clock"]) == ("ok", 0, 61)
    assert result["peak_memory"] == 600


@pytest.mark.parametrize(("cap", "outcome"), [([], "ok"), (["--cap", "1.0"], "thrashed")])
def test_json_overhead_cap_marks_thrashing(tmp_path: Path, capsys, cap, outcome) -> None:
    path = write(tmp_path / "reuse.log", reuse_lines())
    result = run_json(capsys, "--trace", str(path), "--budget", "201", *cap)
    assert result["outcome"] == outcome
    assert result["rematerializations"] == 1
    if outcome == "ok":
        assert result["overhead"] == pytest.approx(80 / 70)


def test_json_equals_the_library_result(chain: Path, capsys) -> None:
    result = run_json(capsys, "--trace", str(chain), "--budget", "250", "--policy", "lru")
    expected = simulate(read_trace(chain), 250, "lru").to_dict()
    assert result == json.loads(json.dumps(expected))


@pytest.mark.parametrize(("ratio", "budget", "outcome"), [("0.2", 120, "oom"), ("0.5", 300, "ok")])
def test_ratio_is_a_fraction_of_peak_memory(chain: Path, capsys, ratio, budget, outcome) -> None:
    result = run_json(capsys, "--trace", str(chain), "--ratio", ratio)
    assert (result["budget"], result["outcome"]) == (budget, outcome)


@pytest.mark.parametrize(("budget", "outcome"), [("150", "OOM"), ("200", "OK")])
def test_readable_output_names_the_outcome(chain: Path, capsys, budget, outcome) -> None:
    assert main(["simulate", "--trace", str(chain), "--budget", budget]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("chain · dtr · budget") and first.endswith(f": {outcome}")
    assert ("failed at operator" in out) == (outcome == "OOM")


def test_unknown_param_is_one_line(chain: Path, capsys) -> None:
    line = run_failing(capsys, "--trace", str(chain), "--budget", "200", "--param", "nosuch=1")
    assert "nosuch" in line


def test_unknown_policy_is_one_line(chain: Path, capsys) -> None:
    line = run_failing(capsys, "--trace", str(chain), "--budget", "200", "--policy", "belady")
    assert "--policy" in line and "'belady'" in line


def test_malformed_trace_names_file_and_line(tmp_path: Path, capsys) -> None:
    lines = chain_lines(2)
    lines[4] = "{not json"  # line 5
    path = write(tmp_path / "broken.log", lines)
    line = run_failing(capsys, "--trace", str(path), "--budget", "200")
    assert line.startswith(f"dtr-holes: {path}:5: expected a JSON object, found invalid JSON")


def test_missing_trace_file_is_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "absent.log"
    assert run_failing(capsys, "--trace", str(path), "--budget", "1").startswith(
        f"dtr-holes: {path}:"
    )


@pytest.mark.parametrize("param", ["alpha", "alpha=", "alpha=fast"])
def test_bad_param_syntax_is_rejected_by_argparse(chain: Path, capsys, param: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--trace", str(chain), "--budget", "1", "--param", param])
    assert info.value.code == 2
    assert "expected NAME=NUMBER" in capsys.readouterr().err


@pytest.mark.parametrize("text, sample", [("all", None), ("0", 0), ("50", 50)])
def test_the_audit_sample_is_a_count_or_all(text: str, sample: int | None) -> None:
    assert parser().parse_args(["audit", "--sample", text]).sample == sample


def test_another_audit_sample_is_rejected_by_argparse(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["audit", "--sample", "every"])
    assert info.value.code == 2
    assert "expected a whole number >= 0 or all, found 'every'" in capsys.readouterr().err


def test_budget_and_ratio_are_exclusive(chain: Path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--trace", str(chain), "--budget", "1", "--ratio", "0.5"])
    assert info.value.code == 2


@pytest.mark.parametrize("ratio", ["nan", "inf"])
def test_non_finite_ratio_is_one_line(chain: Path, capsys, ratio: str) -> None:
    run_failing(capsys, "--trace", str(chain), "--ratio", ratio)


def test_an_interrupt_is_one_line_and_exit_130(chain: Path, capsys, monkeypatch) -> None:
    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("dtrholes.cli.user.simulate", interrupted)
    assert main(["simulate", "--trace", str(chain), "--budget", "300"]) == 130
    out, err = capsys.readouterr()
    assert out == "" and err == "dtr-holes: interrupted\n"


def test_console_script(chain: Path) -> None:
    argv = [str(CONSOLE_SCRIPT), "simulate", "--trace", str(chain), "--budget", "150", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["outcome"] == "oom"

    done = subprocess.run(
        [*argv, "--policy", "nosuch"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("dtr-holes: ")


REPO = Path(__file__).resolve().parents[3]
USER_COMMANDS = ("simulate", "explain", "map", "edge", "protocol", "audit", "trace-torch", "recost")


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("columns", ["80", "250"])
def test_the_help_fits_one_screen_and_lists_the_steps_apart(capsys, monkeypatch, columns) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    text = _help(capsys)
    lines = text.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100, text
    listed = re.findall(r"^    (\S+)", text, re.M)
    assert listed == [*USER_COMMANDS, "steps"]
    assert "dtr-holes steps --help" in text


def test_every_command_the_rules_run_is_a_step_or_a_user_command(capsys) -> None:
    rules = "".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
    run = set(re.findall(r"\{DTR_HOLES\} ([a-z0-9-]+)", rules))
    steps = re.findall(r"^  ([a-z0-9-]+)  ", _help(capsys, "steps"), re.M)
    assert len(steps) == len(set(steps)) == 22
    assert run <= {*steps, *USER_COMMANDS} and "sweep" in run
    for step in steps:  # each callable by name, with its own help
        assert "usage: dtr-holes " + step in _help(capsys, step)


def test_protocol_show_prints_version_and_history(capsys) -> None:
    assert main(["protocol", "show", "--protocol", str(REPO / "protocol")]) == 0
    out = capsys.readouterr().out
    assert "version " in out and "2026-09-26-tcontrol-inspired" in out and "stage_b:" in out


def test_a_bad_amendment_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    shutil.copytree(REPO / "protocol", tmp_path / "protocol")
    bad = tmp_path / "protocol" / "amendments" / "2026-11-29-bad.yaml"
    bad.write_text("date: 2026-11-29\ntitle: x\nkind: amendment\nreason: y\nchanges: [{path: a}]\n")
    assert main(["protocol", "show", "--protocol", str(tmp_path / "protocol")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and err.count("\n") == 1


def test_render_refuses_another_version(tmp_path: Path, capsys) -> None:
    out = tmp_path / "p.json"
    args = ["protocol", "render", "--protocol", str(REPO / "protocol"), "--out", str(out)]
    assert main([*args, "--version", "000000000000"]) == 2 and not out.exists()
    assert main(args) == 0
    assert json.loads(out.read_text())["history"]


def test_protocol_points_prints_the_studys_points_as_csv(tmp_path: Path, capsys) -> None:
    # U-Net's peak as its baseline states it; the study's budgets are int(peak * ratio).
    (tmp_path / "unet.json").write_text(json.dumps({"peak_memory": 8415764928}))
    args = ["protocol", "points", "--protocol", str(REPO / "protocol"), "--baselines"]
    assert main([*args, str(tmp_path), "--stage", "c", "--trace", "unet", "--policy", "dtr"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "stage,trace,policy,ratio,budget,repeat"
    assert lines[1] == "C,unet,dtr,0.0552,464550224,0"  # the study's first U-Net Stage C run
    assert len(lines) == 1 + 80
    assert main([*args, str(tmp_path), "--stage", "Q"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("dtr-holes: --stage: expected one of ['A', 'C', 'DEV'")
        and err.count("\n") == 1
    )


EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "policies.py"


def test_simulate_and_map_run_the_example_policy_file(tmp_path: Path, capsys, monkeypatch) -> None:
    trace = write(tmp_path / "random.log", random_trace_text(4, 40).splitlines())
    monkeypatch.chdir(EXAMPLES.parents[1])  # as the docs run it, from the project's directory
    policy = "examples/policies.py:stale_squared"
    result = run_json(capsys, "--trace", str(trace), "--ratio", "0.5", "--policy", policy)
    assert result["policy"] == "stale-squared"
    out = tmp_path / "map.parquet"
    argv = ["map", "--trace", str(trace), "--from", "0.3", "--to", "0.8", "--out", str(out)]
    assert main([*argv, "--policy", policy]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("random · stale-squared: ") and out.is_file()


def test_map_refuses_a_policy_reading_the_budget(tmp_path: Path, capsys) -> None:
    mine = tmp_path / "mine.py"
    mine.write_text(
        "from simulator import policy\n\n\n@policy('short')\ndef short(c):\n"
        '    """the shortfall"""\n    return c.shortfall / c.size\n'
    )
    trace = write(tmp_path / "random.log", random_trace_text(4, 10).splitlines())
    argv = ["map", "--trace", str(trace), "--from", "0.3", "--to", "0.8", "--out", "m.parquet"]
    assert main([*argv, "--policy", f"{mine}:short"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "dtr-holes: --policy: expected a policy whose score reads no budget (budget, shortfall):"
        " not mapped, found short, which certifies single budgets"
    ]
