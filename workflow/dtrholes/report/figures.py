"""The study's figures: feasibility cliffs, hole-region zooms, overheads, Figure 1 under DTR,
and the mechanism of each explained pair."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.patches  # noqa: E402 (the backend is chosen first)
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from dtrholes.core import files
from dtrholes.core.paths import figure_name  # noqa: E402
from dtrholes.core.samples import COMPLETE  # noqa: E402
from dtrholes.explain.types import Explanation, Mechanism, RunSummary  # noqa: E402
from dtrholes.report.paper.published import study_names  # noqa: E402
from dtrholes.study import plan  # noqa: E402
from simulator.result import OK, OOM, THRASHED, TIMEOUT  # noqa: E402

OUTCOMES = {  # label, colour, marker
    OK: ("completed", "#1b9e77", "o"),
    OOM: ("OOM", "#d95f02", "X"),
    THRASHED: ("thrashed", "#7570b3", "s"),
    TIMEOUT: ("unresolved", "#666666", "^"),
}
# savefig's options per format. Byte-identical files for identical inputs: no timestamps or
# versions in the metadata.
FORMATS = {
    ".png": {"dpi": 150, "metadata": {"Software": None}},
    ".pdf": {
        "metadata": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}
    },
}


def sampled(records: pd.DataFrame, trace: str) -> pd.DataFrame:
    """The trace's sampled runs, one per policy and budget, with an outcome that names
    timeouts as such."""
    rows = records[(records.trace == trace) & records.stage.map(plan.is_sample)].copy()
    rows["outcome"] = rows.outcome.where(rows.status == COMPLETE, TIMEOUT)
    rows = rows.sort_values(["policy", "budget", "repeat"]).drop_duplicates(["policy", "budget"])
    return rows.reset_index(drop=True)


def _scatter_outcomes(ax, rows: pd.DataFrame, x: str, y: str) -> None:
    for outcome, (label, colour, marker) in OUTCOMES.items():
        part = rows[rows.outcome == outcome]
        if len(part):
            ax.scatter(part[x], part[y], c=colour, marker=marker, s=18, label=label, zorder=3)


def cliffs(rows: pd.DataFrame, holes: pd.DataFrame, peak: int, trace: str):
    """Outcome against budget ratio, one panel per policy, y = nesting depth at peak pinned
    memory, hole regions shaded."""
    policies = sorted(rows.policy.unique())
    fig, axes = plt.subplots(
        len(policies), 1, figsize=(8, 1.8 * len(policies) + 0.8), sharex=True, squeeze=False
    )
    for ax, policy in zip(axes[:, 0], policies, strict=True):
        mine = rows[rows.policy == policy]
        for region in _regions(holes, policy):
            ax.axvspan(
                region["first_fail"] / peak, region["last_fail"] / peak, color="#d95f02", alpha=0.15
            )
        _scatter_outcomes(ax, mine, "ratio", "peak_pinned_depth")
        ax.set_ylabel(f"{policy}\ndepth")
    axes[-1, 0].set_xlabel("budget (fraction of peak memory)")
    _legend(fig, axes)
    fig.suptitle(f"{trace}: feasibility against budget (shaded: hole regions)")
    return fig


ZOOM_PANELS, ZOOM_COLUMNS = 12, 3  # regions drawn per trace × policy (the rest: the table)


def zoom_regions(holes: pd.DataFrame, policy: str) -> list[tuple[dict, list[dict]]]:
    """The policy's hole regions in budget order, each with the exact edges inside its brackets."""
    found = []
    for region, edges in _regions_with_edges(holes, policy):
        low, high = region["ok_below"], region["ok_above"]
        found.append((region, [e for e in edges if low <= e["below"] <= high]))
    return found


def drawn(regions: list[tuple[dict, list[dict]]]) -> list[int]:
    """The regions a zoom draws, by index: the ZOOM_PANELS with the most failing samples (the
    lower one first on ties), in budget order."""
    order = sorted(range(len(regions)), key=lambda i: (-regions[i][0]["failing"], i))
    return sorted(order[:ZOOM_PANELS])


def zooms(rows: pd.DataFrame, holes: pd.DataFrame, peak: int, trace: str, policy: str):
    """A grid of hole regions of one trace × policy (at most ZOOM_PANELS; `zoom_table` lists
    them all): each region's samples against the budget ratio, exact edges dashed."""
    regions = zoom_regions(holes, policy)
    shown = drawn(regions)
    if not shown:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{trace} · {policy}: no hole region", ha="center")
        return fig
    columns = min(ZOOM_COLUMNS, len(shown))
    lines = -(-len(shown) // columns)
    fig, axes = plt.subplots(
        lines, columns, figsize=(4 * columns, 2.3 * lines + 0.9), squeeze=False
    )
    mine = rows[rows.policy == policy]
    for ax, i in zip(axes.flat, shown, strict=False):
        _zoom_panel(ax, mine, regions[i], peak, i + 1)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    _legend(fig, axes[:, :1])
    more = f"; {len(regions) - len(shown)} more in the table" if len(regions) > len(shown) else ""
    counted = f"{len(regions)} hole region{'s' * (len(regions) != 1)}"
    fig.suptitle(f"{trace} · {policy}: {counted}{more} (dashed: exact edges)")
    return fig


def _zoom_panel(ax, rows: pd.DataFrame, found: tuple[dict, list[dict]], peak: int, n: int):
    region, edges = found
    low, high = region["ok_below"], region["ok_above"]
    inside = rows[rows.budget.between(low, high)]
    _scatter_outcomes(ax, inside.assign(level=0, x=inside.budget / peak), "x", "level")
    for edge in edges:
        ax.axvline((edge["below"] + 0.5) / peak, color="black", lw=0.8, ls="--")
    ax.set_yticks([])
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(3))
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    ax.set_title(f"region {n}: {region['failing']} failing samples", fontsize=9)
    ax.set_xlabel("budget (fraction of peak)", fontsize=8)
    ax.tick_params(labelsize=8)


def zoom_table(holes: pd.DataFrame, peak: int, trace: str, policy: str) -> str:
    """Every hole region of one trace × policy as a Markdown table, drawn or not."""
    regions = zoom_regions(holes, policy)
    shown = set(drawn(regions))
    lines = [
        f"# {trace} · {policy}: hole regions",
        "",
        "| region | completes below | first failing | last failing | completes above"
        " | failing samples | exact edges (bytes) | drawn |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, (r, edges) in enumerate(regions):
        cells = [r["ok_below"], r["first_fail"], r["last_fail"], r["ok_above"]]
        budgets = " | ".join(f"{b:,} ({b / peak:.5f})" for b in cells)
        cuts = ", ".join(f"{e['below']:,}/{e['above']:,}" for e in edges) or "–"
        lines.append(
            f"| {i + 1} | {budgets} | {r['failing']} | {cuts} | {'yes' if i in shown else 'no'} |"
        )
    if not regions:
        lines.append("| – | | | | | | | |")
    return "\n".join(lines) + "\n"


MARGIN = 0.3  # context either side of a panel's regions, as a share of their span


def figure1(panels: list[tuple[str, pd.DataFrame, pd.DataFrame, int]], timeouts: set[tuple]):
    """The study's Figure 1 for DTR: per trace (name, sampled rows, holes, peak), outcome
    against budget with the nesting depth at peak pinned memory on y, around its regions,
    regions shaded, exact edges dashed, and ringed the samples where the study timed out
    (`timeouts`: (trace, budget)) and this run resolved."""
    policy = study_names().figure1_policy
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.6 * len(panels) + 0.8), squeeze=False)
    for ax, (trace, rows, holes, peak) in zip(axes[:, 0], panels, strict=True):
        _figure1_panel(ax, trace, rows[rows.policy == policy], holes, peak, timeouts)
    _legend(fig, axes)
    fig.suptitle(f"Feasibility against budget under {policy} (the study's Figure 1)")
    return fig


def _figure1_panel(ax, trace, rows, holes, peak, timeouts) -> None:
    regions = zoom_regions(holes, study_names().figure1_policy)
    low, high = _window([r for r, _ in regions], rows)
    shown = rows[rows.budget.between(low, high)].assign(x=lambda r: r.budget / peak)
    for region, edges in regions:
        ax.axvspan(
            region["first_fail"] / peak, region["last_fail"] / peak, color="#d95f02", alpha=0.12
        )
        for edge in edges:
            ax.axvline((edge["below"] + 0.5) / peak, color="black", lw=0.8, ls="--")
    _scatter_outcomes(ax, shown, "x", "peak_pinned_depth")
    studied = shown.budget.map(lambda budget: (trace, budget) in timeouts)
    resolved = shown[studied & (shown.outcome != TIMEOUT)]
    if len(resolved):
        ax.scatter(
            resolved.x,
            resolved.peak_pinned_depth,
            s=110,
            facecolors="none",
            edgecolors="black",
            lw=1.1,
            label="study timed out, resolved here",
            zorder=4,
        )
    ax.set_xlim(low / peak, high / peak)
    ax.set_title(f"{trace}: {len(regions)} hole region{'s' * (len(regions) != 1)}", fontsize=10)
    ax.set_ylabel("depth at peak\npinned memory", fontsize=8)
    ax.set_xlabel(
        "budget (fraction of peak memory); shaded: regions, dashed: exact edges", fontsize=8
    )


def _window(regions: list[dict], rows: pd.DataFrame) -> tuple[float, float]:
    """The budgets a Figure 1 panel shows: its regions with context, else every sample."""
    if not regions:
        return float(rows.budget.min()), float(rows.budget.max())
    low = min(r["ok_below"] for r in regions)
    high = max(r["ok_above"] for r in regions)
    return low - MARGIN * (high - low), high + MARGIN * (high - low)


def overheads(rows: pd.DataFrame, trace: str):
    """Overhead of completed runs against budget ratio, one line per policy."""
    done = rows[rows.outcome == OK]
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.lineplot(data=done, x="ratio", y="overhead", hue="policy", marker="o", ms=3, ax=ax)
    ax.set_yscale("log")
    ax.set_xlabel("budget (fraction of peak memory)")
    ax.set_ylabel("overhead (total compute / model compute)")
    ax.set_title(f"{trace}: overhead of completed runs")
    return fig


def _regions(holes: pd.DataFrame, policy: str) -> list[dict]:
    row = holes[holes.policy == policy]
    return json.loads(row.region_brackets.iloc[0]) if len(row) else []


def _regions_with_edges(holes: pd.DataFrame, policy: str) -> list[tuple[dict, list[dict]]]:
    row = holes[holes.policy == policy]
    edges = json.loads(row.exact_edges.iloc[0]) if len(row) else []
    return [(region, edges) for region in _regions(holes, policy)]


def _legend(fig, axes) -> None:
    handles, labels = {}, {}
    for ax in axes[:, 0]:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
            labels[label] = label
    fig.legend(handles.values(), labels.values(), loc="upper right", fontsize=8)


def save(
    fig, stem: Path, suffixes: tuple[str, ...] = (".png", ".pdf"), tight: bool = True
) -> list[Path]:
    """Write `stem` in each format (.png, .pdf), without timestamps; laid out tightly first
    (room for a legend on the right) unless the figure was laid out already."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    if tight:
        fig.tight_layout(rect=(0, 0, 0.88, 0.97))
    paths = [stem.with_suffix(suffix) for suffix in suffixes]
    for path in paths:
        with files.atomic(path) as tmp:
            fig.savefig(tmp, format=path.suffix[1:], **FORMATS[path.suffix])
    plt.close(fig)
    return paths


def plot_trace(records: list[dict], holes: list[dict], peak: int, trace: str, out: Path) -> None:
    """The cliffs and overhead figures of one trace under `out` (PNG and PDF), from the rows
    of the records and holes tables."""
    rows = sampled(pd.DataFrame(records), trace)
    save(cliffs(rows, _of_trace(holes, trace), peak, trace), out / figure_name("cliffs", trace))
    save(overheads(rows, trace), out / figure_name("overhead", trace))


def plot_zoom(
    records: list[dict], holes: list[dict], peak: int, trace: str, policy: str, out: Path
) -> None:
    """One trace × policy's region zooms under `out`: the grid (PNG and PDF) and the table
    of every region (Markdown)."""
    rows, mine = sampled(pd.DataFrame(records), trace), _of_trace(holes, trace)
    stem = out / figure_name("zoom", trace, policy)
    save(zooms(rows, mine, peak, trace, policy), stem)
    files.write_text(stem.with_suffix(".md"), zoom_table(mine, peak, trace, policy))


def plot_figure1(
    records: list[dict], holes: list[dict], peaks: dict[str, int], timeouts: set, out: Path
) -> list[Path]:
    """The study's Figure 1 for DTR, a panel per trace of its Figure 1 that `peaks` has."""
    table = pd.DataFrame(records)
    names = study_names()
    shown = [t for t in names.figure1_traces if t in peaks]
    panels = [(t, sampled(table, t), _of_trace(holes, t), peaks[t]) for t in shown]
    return save(figure1(panels, timeouts), out / figure_name("figure1", names.figure1_policy))


def _of_trace(holes: list[dict], trace: str) -> pd.DataFrame:
    table = pd.DataFrame(holes)
    return table[table.trace == trace] if len(table) else table


BOX = {  # face and edge colour of the mechanism figure's boxes
    "step": ("#f2f2f2", "#888888"),
    "decisive": ("#fff2cc", "#d95f02"),
    "oom": ("#f4cccc", "#c0392b"),
    "ok": ("#d9ead3", "#1b9e77"),
}
ROW, BOX_HEIGHT, LINE = 1.55, 1.15, 62  # inches per row and per box; characters per line


def explanation(
    x: Explanation, stem: Path, suffixes: tuple[str, ...] = (".png", ".pdf")
) -> list[Path]:
    """One explained pair as the study drew its Figure 2: a column per run (completing,
    failing), a row per decisive step (steps that coincide share one), boxes with the numbers,
    arrows down, the failure in red, completion in green, the retention result below. Laid out
    by hand (fixed sizes, no tight_layout), so the same explanation gives the same file."""
    rows = mechanism_rows(x)
    width, height = 10.0, 1.25 + ROW * len(rows) + 0.75
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # inches from the top
    ax.axis("off")
    _figure_text(ax, width / 2, 0.3, _mechanism_title(x), 11, weight="bold")
    for column, run in enumerate(("ok", "fail")):
        _figure_text(ax, _column_centre(column), 0.8, _column_title(getattr(x, run), run), 9.5)
    for i, (step, cells) in enumerate(rows):
        top = 1.2 + ROW * i
        _figure_text(ax, 0.45, top + BOX_HEIGHT / 2, f"step {step}", 9.5, weight="bold")
        for column, (text, kind) in enumerate(cells):
            _box(ax, column, top, text, kind)
            if i + 1 < len(rows):
                ax.annotate(
                    "",
                    xy=(_column_centre(column), top + ROW),
                    xytext=(_column_centre(column), top + BOX_HEIGHT),
                    arrowprops={"arrowstyle": "-|>", "color": "#555555", "lw": 1.2},
                )
    footer = _retention_footer(x)
    _figure_text(ax, width / 2, height - 0.4, footer, 9.5, colour=_footer_colour(x))
    return save(fig, stem, suffixes, tight=False)


def _column_centre(column: int) -> float:
    return 3.05 + 4.4 * column


def _box(ax, column: int, top: float, text: str, kind: str) -> None:
    face, edge = BOX[kind]
    left = _column_centre(column) - 2.1
    ax.add_patch(
        matplotlib.patches.FancyBboxPatch(
            (left, top),
            4.2,
            BOX_HEIGHT,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor=face,
            edgecolor=edge,
            lw=1.3,
        )
    )
    _figure_text(ax, _column_centre(column), top + BOX_HEIGHT / 2, text, 8.5)


def _figure_text(ax, x: float, y: float, text: str, size: float, **style) -> None:
    colour = style.pop("colour", "black")
    # Storage names such as x1$$ are text, not mathtext.
    ax.text(
        x,
        y,
        text,
        ha="center",
        va="center",
        fontsize=size,
        color=colour,
        parse_math=False,
        linespacing=1.35,
        **style,
    )


def mechanism_rows(x: Explanation) -> list[tuple[int, list[tuple[str, str]]]]:
    """The figure's rows: per decisive step, each run's box text and kind (see BOX)."""
    m = x.mechanism
    cells: dict[int, dict[str, list[str]]] = {}

    def add(step: int, ok: str | None, fail: str | None) -> None:
        row = cells.setdefault(step, {"ok": [], "fail": []})
        row["ok"] += [ok] if ok else []
        row["fail"] += [fail] if fail else []

    if m.contrast is not None:
        add(m.contrast.step, *_contrast_cells(m))
    if m.storage is not None:
        add(m.removed_at_step, _ok_at_removal(x), _removal_cell(m))
    add(m.failure.step, _ok_end(x), _failure_cell(m))
    last = m.failure.step
    rows = []
    for step in sorted(cells):
        kinds = {"ok": "ok" if step == last else "step", "fail": "oom" if step == last else "step"}
        if step == m.removed_at_step and step != last:
            kinds["fail"] = "decisive"
        texts = {run: "\n".join(_wrapped(cells[step][run]) or ["–"]) for run in kinds}
        rows.append((step, [(texts[run], kinds[run]) for run in ("ok", "fail")]))
    return rows


def _wrapped(parts: list[str]) -> list[str]:
    return [line for part in parts for line in textwrap.wrap(part, LINE)]


def _contrast_cells(m: Mechanism) -> tuple[str, str]:
    k = m.contrast
    ok = f"{k.shortfall:,} B short: evicts {k.storage} ({k.size:,} B) — the failing run keeps it"
    short = k.failing_shortfall
    if short is None:
        return ok, f"keeps {k.storage}"
    if short <= 0:
        fit = "fits exactly" if short == 0 else f"fits, {-short:,} B to spare"
        return ok, f"same allocation (op {k.op}): {fit}; keeps {k.storage}"
    if m.storage in k.failing_evicted:
        return ok, f"keeps {k.storage}"
    spare = k.failing_freed - short
    return ok, (
        f"same allocation (op {k.op}): {short:,} B short, evicts"
        f" {len(k.failing_evicted)}, fits with {spare:,} B to spare; keeps {k.storage}"
    )


def _removal_cell(m: Mechanism) -> str:
    e, storage = m.eviction, m.storage
    if e is None:
        return f"frees {storage} ({m.size:,} B): its last reference is released"
    if e.rank == 1 and e.runner_up is not None:
        rank = (
            f"ranked 1st of {e.candidates:,} (score {_short_score(e.score)}), runner-up"
            f" {e.runner_up} ({_short_score(e.runner_up_score)})"
        )
    else:
        rank = f"rank {e.rank or '–'} of {e.candidates:,}, score {_short_score(e.score)}"
    return f"{e.shortfall:,} B short: evicts {storage} ({m.size:,} B), {rank}"


def _ok_at_removal(x: Explanation) -> str | None:
    d, m = x.decisive, x.mechanism
    shared = {m.failure.step, m.contrast and m.contrast.step}
    if m.removed_at_step in shared:  # that row's box already says what it holds
        return None
    keeps = f"keeps {m.storage}" if d.ok_holds_it else ""
    short = m.eviction and m.eviction.completing_shortfall
    if short is None:
        return keeps or None
    if short <= 0:
        fit = "fits exactly" if short == 0 else f"fits, {-short:,} B to spare"
    else:
        fit = f"{short:,} B short, evicts {len(m.eviction.completing_evicted)}"
    return f"same allocation: {fit}" + (f"; {keeps}" if keeps else "")


def _ok_end(x: Explanation) -> str:
    ok, m = x.ok, x.mechanism
    held = ""
    if m.needed_at_step is not None:
        held = f"{m.storage} " + ("in memory; " if x.decisive.ok_holds_it else "rebuilt; ")
    return f"{held}completes: overhead {ok.overhead:.4f}, max depth {ok.max_depth}"


def _failure_cell(m: Mechanism) -> str:
    f = m.failure
    needs = f"needs {m.storage}: " if m.needed_at_step is not None else ""
    cascade = f"{needs}cascade {f.depth} deep, {f.pinned:,} B pinned"
    if f.outcome == OOM:
        return (
            f"{cascade}; op {f.op} asks {f.request:,} B, {f.over_budget:,} B over the budget: OOM"
        )
    return f"{cascade}: {f.outcome.upper()}"


def _short_score(score: object) -> str:
    return score if isinstance(score, str) else f"{score:.4g}"


def _mechanism_title(x: Explanation) -> str:
    diff = x.mechanism.budget_difference
    return (
        f"{x.trace} · {x.policy}: {x.fail.budget:,} B fails where"
        f" {x.ok.budget:,} B completes ({diff:+,} B)"
    )


def _column_title(run: RunSummary, name: str) -> str:
    ratio = f" ({run.ratio:.4f} of peak)" if run.ratio is not None else ""
    label = "completing run" if name == "ok" else "failing run"
    return f"{label}: {run.budget:,} B{ratio}"


def _retention_footer(x: Explanation) -> str:
    r, storage = x.mechanism.retention, x.mechanism.storage
    if r is None:
        return "No storage removed whose retention could be tried."
    control = (
        "control retaining nothing: fails as before" if r.valid else "control differs: invalid"
    )
    outcome = f"completes, overhead {r.overhead:.4f}" if r.outcome == OK else r.outcome.upper()
    return f"Retaining {storage} at the failing budget: {outcome} ({control})"


def _footer_colour(x: Explanation) -> str:
    r = x.mechanism.retention
    return BOX["ok"][1] if r and r.outcome == OK and r.valid else BOX["oom"][1]


MAP_COLOURS = {OK: "#1b9e77", OOM: "#d95f02", THRASHED: "#7570b3"}
UNCOVERED_COLOUR = "#bbbbbb"  # uncovered or timed out: no known outcome
ZOOMS = 8  # hole zooms per figure: the widest holes


def map_strips(found: list, trace: str):
    """One strip per policy, each tile coloured by outcome along the budget ratio, then zooms
    (in bytes) on the widest holes with two widths of context either side."""
    from dtrholes.holes import (
        maps,  # the map tables' module, kept out of the plotting imports above
    )

    found = sorted(found, key=lambda m: m.policy)
    zooms = sorted(
        ((h.width, m.policy, h.first, h.last, m) for m in found for h in maps.summarise(m).holes),
        key=lambda z: (-z[0], z[1], z[2]),
    )[:ZOOMS]
    rows = max(1, len(found)) + len(zooms)
    fig, axes = plt.subplots(rows, 1, figsize=(8, 0.9 * rows + 1.2), squeeze=False)
    if not found:
        axes[0, 0].axis("off")
        axes[0, 0].text(0.5, 0.5, f"{trace}: no map", ha="center")
    for ax, m in zip(axes[:, 0], found, strict=False):
        _strip(ax, m.tiles, m.peak)
        ax.set_ylabel(m.policy, rotation=0, ha="right", fontsize=8)
        ax.set_xlabel("budget (fraction of peak memory)", fontsize=8)
    for ax, (width, policy, first, last, m) in zip(axes[len(found) :, 0], zooms, strict=True):
        low, high = first - 2 * width, last + 2 * width
        _strip(ax, [t for t in m.tiles if t.last >= low and t.first <= high], None)
        ax.set_xlim(low, high + 1)
        ax.set_title(f"{policy}: fails {first:,}..{last:,} ({width:,} bytes)", fontsize=8)
        ax.set_xlabel("budget (bytes)", fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in MAP_COLOURS.values()]
    labels = [OUTCOMES[o][0] for o in MAP_COLOURS]
    fig.legend(
        [*handles, plt.Rectangle((0, 0), 1, 1, color=UNCOVERED_COLOUR)],
        [*labels, "uncovered"],
        loc="upper right",
        fontsize=8,
    )
    fig.suptitle(f"{trace}: exact feasibility maps")
    return fig


def _strip(ax, tiles, peak: int | None) -> None:
    """Tiles as bars along x (ratios when `peak` is given, else bytes)."""
    scale = peak or 1
    for outcome in (*MAP_COLOURS, None):
        mine = [t for t in tiles if (t.outcome == outcome) or (outcome is None and not t.exact)]
        bars = [(t.first / scale, (t.last + 1 - t.first) / scale) for t in mine]
        if bars:
            ax.broken_barh(bars, (0, 1), color=MAP_COLOURS.get(outcome, UNCOVERED_COLOUR), lw=0)
    ax.set_yticks([])


def noise(series: list[tuple[object, list[tuple[object, object]]]]):
    """The cost-noise study: per trace × policy, the failing budgets of the original map (top
    row; its holes shaded across) and of each perturbed trace's map (a row per seed, grouped by
    sigma), along the budget ratio around every map's holes: where they stay, move, vanish or
    appear. Budgets a map left uncovered are grey."""
    from dtrholes.holes import maps, noise  # the map tables' modules, kept out of the imports above

    fig, axes = plt.subplots(len(series), 1, figsize=(8, 3.2 * len(series) + 0.6), squeeze=False)
    for ax, (original, perturbed) in zip(axes[:, 0], series, strict=True):
        peak = original.peak
        every = [original] + [m for _, m in perturbed]
        holes = [maps.summarise(m).holes for m in every]  # the original's first
        for h in holes[0]:
            low, high = h.first / peak - noise.WIDEN, (h.last + 1) / peak + noise.WIDEN
            ax.axvspan(low, high, color="#d95f02", alpha=0.12, lw=0)
        # the original on top, a blank row, then a row per perturbed trace, grouped by sigma
        for y, m in zip([0] + [-(2 + i) for i in range(len(perturbed))], every, strict=True):
            for x in maps.segments(m.tiles):
                if x.kind == "failing":
                    ax.hlines(y, x.first / peak, (x.last + 1) / peak, color="#d95f02", lw=4)
                    # a tick marks where the bar would be too narrow to see
                    ax.plot(x.first / peak, y, "|", color="#d95f02", ms=7, mew=1)
                elif x.kind == maps.UNCOVERED:
                    ax.hlines(y, x.first / peak, (x.last + 1) / peak, color=UNCOVERED_COLOUR, lw=4)
        sigmas = [p.recipe.sigma for p, _ in perturbed]
        groups = {s: (sigmas.index(s), sigmas.count(s)) for s in sigmas}
        ticks = [0] + [-(2 + first + (count - 1) / 2) for first, count in groups.values()]
        ax.set_yticks(ticks, ["original"] + [f"σ {s:g}" for s in groups], fontsize=8)
        for first, _ in groups.values():
            ax.axhline(-(1.5 + first), color="#999999", lw=0.5)
        ax.set_ylim(-(2 + len(perturbed)), 1)
        # every map's holes in view: the original's and those the noise moved or made
        if shown := [h for found in holes for h in found]:
            span = [min(h.first for h in shown) / peak, max(h.last + 1 for h in shown) / peak]
            margin = max(0.005, (span[1] - span[0]) * 0.05)
            ax.set_xlim(span[0] - margin, span[1] + margin)
        ax.set_xlabel("budget (fraction of peak memory)", fontsize=8)
        ax.set_title(
            f"{original.trace} · {original.policy}: failing budgets of the exact maps, a row "
            f"per seed (shaded: the original's holes ± {noise.WIDEN})",
            fontsize=9,
        )
    fig.suptitle("Holes under log-normal cost noise")
    return fig
