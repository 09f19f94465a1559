"""Audit of a results directory: every claim derived again from the records, a module per check
(`record_files`, `origins`, `claims`, `reexecution`, `map_tiles`, `explanations`, `evidence`), the
inventory of the results and its evidence table (`inventory`), what every check reads and gives
(`context`) and the report (`verdicts`). May import: every package of dtrholes but `cli`."""

from __future__ import annotations

import functools
from collections.abc import Callable

from dtrholes.audit.claims import check_claims
from dtrholes.audit.context import SEED, Check, Context, Failure, Options, load
from dtrholes.audit.evidence import check_evidence, evidence_table
from dtrholes.audit.explanations import check_explanations, mechanism_problem
from dtrholes.audit.map_tiles import check_maps
from dtrholes.audit.origins import check_provenance
from dtrholes.audit.record_files import check_records
from dtrholes.audit.reexecution import check_reexecution, sample
from dtrholes.audit.verdicts import Report, write

__all__ = [
    "SEED",
    "Check",
    "Context",
    "Failure",
    "Options",
    "Report",
    "check_claims",
    "check_evidence",
    "check_explanations",
    "check_maps",
    "check_provenance",
    "check_records",
    "check_reexecution",
    "load",
    "mechanism_problem",
    "run",
    "sample",
    "write",
]


def run(
    options: Options, clock: Callable[[], float], progress: Callable[[str], None] = print
) -> Report:
    """Every check on `options.results`, each verdict reported as it is reached; `clock` times
    the audit."""
    start = clock()
    ctx = load(options)
    table = evidence_table(ctx)
    picked = sample(ctx)
    checks = []
    for check in (
        check_records,
        check_provenance,
        check_claims,
        functools.partial(check_reexecution, picked=picked, progress=progress),
        check_maps,
        check_explanations,
        lambda _: check_evidence(table),
    ):
        checks.append(check(ctx))
        progress(str(checks[-1]))
    return Report(tuple(checks), table, tuple(picked[0]), clock() - start)
