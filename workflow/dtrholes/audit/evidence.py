"""The evidence check: every execution ever recorded is in the evidence table, with its status."""

from __future__ import annotations

from collections import Counter

from dtrholes.audit import inventory
from dtrholes.audit.context import Check, Context


def check_evidence(table: list[dict]) -> Check:
    statuses = Counter(row["status"] for row in table)
    notes = tuple(f"{n} {status}" for status, n in sorted(statuses.items()))
    return Check("evidence", len(table), (), notes)


def evidence_table(ctx: Context) -> list[dict]:
    """One row per record file and per listed run without one, with its status."""
    return inventory.rows(ctx.inv.files, ctx.inv.cited(), ctx.inv.rendered["version"])
