"""An explanation as people read it: Markdown, the mechanism first, then the evidence behind it."""

from __future__ import annotations

from dtrholes.explain.mechanism import score_text
from dtrholes.explain.types import (
    Cascade,
    Decision,
    Decisive,
    Explanation,
    Probe,
    RankedDecision,
    Retention,
    RunSummary,
)

SHOWN = 12  # rows per list in the Markdown reading; the JSON has them all


def markdown(x: Explanation) -> str:
    """A reading of one explanation, numbers from its parts only."""
    ok, fail, d, c = x.ok, x.fail, x.divergence, x.cascade
    lines = [
        f"## {x.trace} · {x.policy}: {_budget(ok)} completes, {_budget(fail)} fails"
        f" ({fail.outcome})",
        "",
        f"**Mechanism.** {x.mechanism.text}",
        "",
        "### 1. Divergence",
        f"Both runs make the same first {d.common_prefix} eviction decisions; decision"
        f" {d.common_prefix} differs: completing run {_choice(d.ok)}, failing run"
        f" {_choice(d.fail)}.",
        "",
        "| run | evictions before | remats before | evictions after | remats after |",
        "|---|---|---|---|---|",
        *(
            f"| {run} | {before.evictions} | {before.rematerializations}"
            f" | {after.evictions} | {after.rematerializations} |"
            for run, before, after in (
                ("ok", d.before.ok, d.after.ok),
                ("fail", d.before.fail, d.after.fail),
            )
        ),
        "",
        f"The failing run stops at operator {c.op} (step {c.step}): it asks for"
        f" {c.request:,} bytes with {c.pinned:,} bytes pinned at nesting depth {c.depth},"
        f" {c.over_budget:,} bytes over the budget.",
        "",
        *_probe_lines(x.probe, _decisive_rows(x.decisive)),
        *_cascade_lines(c),
        *_retention_lines(x.retention),
    ]
    return "\n".join(lines) + "\n"


def _budget(run: RunSummary) -> str:
    ratio = f" ({run.ratio:.6f} of peak)" if run.ratio is not None else ""
    return f"{run.budget:,} bytes{ratio}"


def _choice(d: Decision | None) -> str:
    if d is None:
        return "makes no further decision"
    return f"evicts {d.storage} ({d.size:,} bytes) at operator {d.op}, step {d.step}"


def _decisive_rows(d: Decisive | None) -> dict[str, list[tuple[str, RankedDecision]]]:
    """Per run, its decisive decisions with the mark the listing gives them."""
    rows: dict[str, list[tuple[str, RankedDecision]]] = {"ok": [], "fail": []}
    if d is None:
        return rows
    if d.contrast is not None:
        rows["ok"].append(("contrast: the failing run keeps it", d.contrast))
    if d.eviction is not None:
        why = "the failure rebuilds it" if d.needed_at_step is not None else "first to differ"
        rows["fail"].append((f"evicts {d.storage}: {why}", d.eviction))
    return rows


def _probe_lines(p: Probe, decisive: dict[str, list[tuple[str, RankedDecision]]]) -> list[str]:
    lines = [
        f"### 2. Decision probe (steps {p.first_step}–{p.last_step})",
        "",
        "Each run's decisive decisions come first (**marked**), then its last decisions.",
        "",
        "| run | decision | step | op | shortfall | chosen (rank / candidates) | top candidates:"
        " storage e* size staleness \\|e*\\| score |",
        "|---|---|---|---|---|---|---|",
    ]
    for run, probed in (("ok", p.ok), ("fail", p.fail)):
        marked = {d.decision for _, d in decisive[run]}
        lines += [_decision_row(run, d, mark) for mark, d in decisive[run]]
        decisions = [d for d in probed.decisions if d.decision not in marked]
        hidden = len(decisions) - SHOWN
        if hidden > 0:
            lines.append(f"| {run} | … {hidden} earlier decisions in the JSON | | | | | |")
        lines += [_decision_row(run, d) for d in decisions[-SHOWN:]]
        if probed.omitted:
            lines.append(
                f"| {run} | … {probed.omitted} decisions in the window's middle, not listed"
                " | | | | | |"
            )
    return [*lines, ""]


def _decision_row(run: str, d: RankedDecision, mark: str | None = None) -> str:
    top = "<br>".join(
        f"{c.storage} {c.e_star:,} {c.size:,} {c.staleness:,} {c.neighbourhood}"
        f" {score_text(c.score)}"
        for c in d.top
    )
    chosen = f"{d.storage} ({d.rank or '–'} / {d.candidates})"
    if mark:
        chosen = f"**{chosen}: {mark}**"
    return f"| {run} | {d.decision} | {d.step} | {d.op} | {d.shortfall:,} | {chosen} | {top} |"


def _cascade_lines(c: Cascade) -> list[str]:
    frames = c.rebuilding
    lines = [
        "### 3. Cascade",
        "",
        f"At the failure {len(frames)} rematerializations were in progress (outermost first);"
        " each storage with how the failing run last removed it (evicted by a decision, or"
        " freed when its last reference was released).",
        "",
        "| storage | operator | depth | bytes | removed by | decision | at step | steps before"
        " failure | first evicted in the completing run at step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    shown = frames if len(frames) <= SHOWN else frames[: SHOWN // 2] + frames[-SHOWN // 2 :]
    for i, f in enumerate(shown):
        if len(frames) > SHOWN and i == SHOWN // 2:
            lines.append(f"| … {len(frames) - SHOWN} more in the JSON | | | | | | | | |")
        lines.append(
            f"| {f.storage} | {f.op} | {f.depth} | {_maybe(f.size)} |"
            f" {f.removed_by or '–'} | {_maybe(f.evicted_by_decision)} |"
            f" {_maybe(f.evicted_at_step)} | {_maybe(f.steps_before_failure)} |"
            f" {_maybe(f.ok_run_first_evicted_at_step)} |"
        )
    return [*lines, ""]


def _maybe(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _retention_lines(r: Retention | None) -> list[str]:
    if r is None:
        return ["### 4. Retention", "", "No storage to retain: nothing was rebuilt or chosen.", ""]
    i, c = r.intervention, r.control
    verdict = (
        "The control replays the failure exactly: the intervention is valid."
        if r.valid
        else "**The control does not replay the failure: the intervention is invalid.**"
    )
    return [
        "### 4. Retention",
        "",
        f"Retaining {r.storage} (never an eviction candidate, its bytes stay under the same"
        f" budget): {i.outcome}, overhead {i.overhead:.4f}, {i.evictions} evictions."
        f" Control retaining nothing: {c.outcome}, {c.evictions} evictions. {verdict}",
        "",
    ]
