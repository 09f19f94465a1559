"""A corpus of bad inputs (malformed traces, bad command-line values, bad settings, bad
amendments): each is refused with exit != 0, no traceback, and a first line that names the
file and line (or the option or settings key) and what was expected."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dtrholes.cli import main
from tests.support.archive import archive_source
from tests.support.logs import chain_lines, j, write
from tests.support.scenario import REPO, make_scenario

START = j(INSTRUCTION="ANNOTATE", ANNOTATION="START")
GOOD = chain_lines(2)  # START, x0 and x1 (three lines each), a RELEASE: 8 lines
SNAKEMAKE_NOTICES = ("Using workflow specific profile", "Config file ")


def trace(lines: list[str]) -> Callable[[Path], list[str]]:
    """`simulate` on a trace file with these lines."""

    def argv(tmp: Path) -> list[str]:
        return ["simulate", "--trace", str(write(tmp / "t.log", lines)), "--budget", "1000"]

    return argv


def command(*argv: str) -> Callable[[Path], list[str]]:
    """A command line; `{tmp}` stands for the test's directory, which exists."""
    return lambda tmp: [a.replace("{tmp}", str(tmp)) for a in argv]


CLI = {
    "trace-start-only": (trace([START]), "t.log:1: expected an operator (CALL or MUTATE)"),
    "trace-blank-line": (trace([*GOOD[:4], "", *GOOD[4:]]), "t.log:5: expected a JSON object"),
    "trace-bad-json": (trace([*GOOD[:4], "{oops", *GOOD[5:]]), "t.log:5: expected a JSON"),
    "trace-empty": (trace([]), "t.log:1: expected trace instructions, found an empty file"),
    "trace-unknown-instruction": (
        trace([START, j(INSTRUCTION="FROB", NAME="a")]),
        "t.log:2: expected a known instruction",
    ),
    "trace-no-start": (trace(GOOD[1:]), "t.log:7: expected an ANNOTATE START line"),
    "trace-missing": (command("simulate", "--trace", "{tmp}/no.log", "--budget", "1"), "no.log"),
    "map-out-is-a-directory": (
        command("map", "--trace", "x", "--from", "0.1", "--to", "0.2", "--out", "{tmp}"),
        "argument --out: expected a file path, found the directory",
    ),
    "explain-out-is-a-file": (
        command("explain", "--trace", "x", "--ok", "0.2", "--fail", "0.1", "--out", __file__),
        "argument --out: expected a directory, found the file",
    ),
    "audit-no-results": (
        command("audit", "{tmp}/nosuch"),
        "nosuch: expected a results directory",
    ),
    "edge-swapped": (
        command("edge", "--trace", "x", "--low", "0.102", "--high", "0.101"),
        "--low, --high: expected --low below --high",
    ),
    "ratio-not-a-number": (
        command("simulate", "--trace", "x", "--ratio", "abc"),
        "argument --ratio: invalid float value",
    ),
    "param-syntax": (
        command("simulate", "--trace", "x", "--ratio", "0.5", "--param", "b"),
        "argument --param: expected NAME=NUMBER",
    ),
    "unknown-command": (command("frob"), "argument command: invalid choice: 'frob'"),
    "amendment-yml": (
        command("protocol", "show", "--protocol", "{tmp}/protocol"),
        "2026-12-06-late.yml: expected the extension .yaml",
    ),
}


@pytest.mark.parametrize(("argv", "expected"), CLI.values(), ids=CLI.keys())
def test_a_bad_input_to_the_command_line_is_one_line(tmp_path: Path, capsys, argv, expected):
    amendments = tmp_path / "protocol" / "amendments"
    amendments.mkdir(parents=True)
    (tmp_path / "protocol" / "base.yaml").write_bytes((REPO / "protocol/base.yaml").read_bytes())
    (amendments / "2026-12-06-late.yml").write_text("date: 2026-12-06\n")
    try:
        code = main(argv(tmp_path))
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.splitlines()) == 1 and expected in err, err


AMENDMENT = """\
date: {date}
title: t
kind: amendment
reason: r
changes: [{{path: limits/overhead_cap, old: 60, new: 70}}]
"""

WORKFLOW = {
    "config-unknown-trace": (["traces=[nosuch]"], {}, "config key traces: expected the trace"),
    "config-unknown-policy": (["policies=[lru]"], {}, "config key policies: expected the prot"),
    "config-empty-traces": (["traces=[]"], {}, "config key traces: expected null (every one)"),
    "config-bad-type": (["points_per_job=abc"], {}, "config key points_per_job: expected a value"),
    "config-unknown-key": (["trace=[unet]"], {}, "config key trace: expected one of the known"),
    "amendment-yml": ([], {"2026-12-06-a.yml": AMENDMENT}, "a.yml: expected the extension .yaml"),
    "amendment-YAML": ([], {"2026-12-06-a.YAML": AMENDMENT}, "expected the extension .yaml"),
    "amendment-misdated": (
        [],
        {"2026-12-05-a.yaml": AMENDMENT.replace("{date}", "2026-12-06")},
        "2026-12-05-a.yaml: date: expected 2026-12-05, as its file name says",
    ),
    "amendment-malformed-yaml": (
        [],
        {"2026-12-06-a.yaml": "date: 2026-12-06\ntitle: [unclosed\n"},
        "2026-12-06-a.yaml:3:1: expected a readable YAML amendment",
    ),
}


@pytest.mark.parametrize(("config", "amend", "expected"), WORKFLOW.values(), ids=WORKFLOW.keys())
def test_a_bad_setting_or_amendment_stops_the_workflow_in_one_line(
    tmp_path: Path, config: list[str], amend: dict[str, str], expected: str
) -> None:
    scenario = make_scenario(tmp_path / "scenario")
    for name, text in amend.items():
        (scenario / "protocol" / "amendments" / name).write_text(text.format(date=name[:10]))
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    command += ["--directory", str(scenario), "-n"]
    command += ["--config", *config] if config else []
    env = {**os.environ, "DTR_HOLES_ARCHIVE": archive_source()}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    lines = [x for x in done.stderr.splitlines() if not x.startswith(SNAKEMAKE_NOTICES)]
    assert done.returncode != 0 and "Traceback" not in done.stderr and 'File "' not in done.stderr
    assert lines and lines[0].startswith("dtr-holes: ") and expected in lines[0], done.stderr
