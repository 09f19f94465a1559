"""The audit's report: its verdicts as Markdown and JSON, and the evidence table as CSV."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from dtrholes.audit import inventory
from dtrholes.audit.context import Check
from dtrholes.core import files

TITLES = {
    "records": "every record file is a valid, unique record; every listed record exists, with"
    " the bytes whose sha256 its job output states",
    "provenance": "trace bytes and checksums, protocol versions and code versions are on file",
    "claims": "the records table, job outputs and tables are derived again from the records",
    "re-execution": "a seeded sample of records, region edge points included, reruns identically",
    "maps": "map tiles cover their ranges once, match their records, and random budgets inside"
    " random tiles rerun to the tile's outcome",
    "explanations": "every explained pair states its two runs as the records it cites hold them,"
    " records a job output lists, and its mechanism summary as its parts give it",
    "evidence": "every execution ever recorded is in the evidence table, with its status",
}


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]
    evidence: list[dict]
    sample: tuple[str, ...]
    seconds: float

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def to_json(report: Report) -> dict:
    return {
        "passed": report.passed,
        "seconds": round(report.seconds, 3),
        "rerun": list(report.sample),
        "checks": [
            {
                "name": c.name,
                "title": TITLES[c.name],
                "passed": c.passed,
                "count": c.count,
                "failures": [{"where": f.where, "message": f.message} for f in c.failures],
                "notes": list(c.notes),
            }
            for c in report.checks
        ],
    }


def markdown(report: Report) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    lines = [
        f"# Audit: {verdict}",
        "",
        f"{len(report.checks)} checks in {report.seconds:.1f} s.",
        "",
        "| check | what | items | failures |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {c.name} | {TITLES[c.name]} | {c.count} | {len(c.failures)} |" for c in report.checks
    ]
    for c in report.checks:
        lines += ["", f"## {c.name}: {'passed' if c.passed else 'FAILED'}", ""]
        lines += [f"- {f.where}: {f.message}" for f in c.failures] or ["- no failures"]
        lines += [f"- note: {note}" for note in c.notes]
    lines += ["", "## Executions not cited by the current results", ""]
    lines += ["| run id | status | reason |", "|---|---|---|"]
    lines += [
        f"| {row['run_id']} | {row['status']} | {row['reason']} |"
        for row in report.evidence
        if row["status"] != "current"
    ]
    return "\n".join(lines) + "\n"


def write(report: Report, markdown_out: Path, json_out: Path, evidence_out: Path) -> None:
    """The report as Markdown and JSON, and the evidence table as CSV."""
    files.write_text(markdown_out, markdown(report))
    files.write_text(json_out, json.dumps(to_json(report), indent=1) + "\n")
    inventory.write_csv(report.evidence, evidence_out)
