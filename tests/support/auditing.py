"""Running the audit CLI on a scenario and reading its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dtrholes import cli


def audit(
    directory: Path, capsys: pytest.CaptureFixture, out: Path, *more: str
) -> tuple[int, dict, str]:
    """Run the audit CLI on a scenario, reporting into `out`; exit status, JSON report and
    what it printed."""
    argv = ["audit", str(directory / "results"), "--data", str(directory / "data"), *more]
    argv += ["--sheet", str(directory / "config" / "traces.tsv"), "--json", str(out / "a.json")]
    status = cli.main([*argv, "--markdown", str(out / "a.md"), "--evidence", str(out / "e.csv")])
    printed = capsys.readouterr()
    return status, json.loads((out / "a.json").read_text()), printed.out + printed.err


def failures(report: dict, check: str) -> list[str]:
    found = next(c for c in report["checks"] if c["name"] == check)
    return [f"{f['where']}: {f['message']}" for f in found["failures"]]
