"""The study's figures per trace: feasibility cliffs, hole-region zooms, overhead by policy."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 (the backend is chosen first)
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from dtrholes import plan  # noqa: E402

OUTCOMES = {  # label, colour, marker
    "ok": ("completed", "#1b9e77", "o"),
    "oom": ("OOM", "#d95f02", "X"),
    "thrashed": ("thrashed", "#7570b3", "s"),
    "timeout": ("unresolved", "#666666", "^"),
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
    rows["outcome"] = rows.outcome.where(rows.status == "complete", "timeout")
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


def zooms(rows: pd.DataFrame, holes: pd.DataFrame, peak: int, trace: str):
    """One panel per hole region: its samples in bytes, exact edges as vertical lines."""
    panels = [
        (policy, region, edges)
        for policy in sorted(rows.policy.unique())
        for region, edges in _regions_with_edges(holes, policy)
    ]
    if not panels:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{trace}: no hole region in the sampled series", ha="center")
        return fig
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.2 * len(panels) + 0.6), squeeze=False)
    for ax, (policy, region, edges) in zip(axes[:, 0], panels, strict=True):
        low, high = region["ok_below"], region["ok_above"]
        mine = rows[(rows.policy == policy) & rows.budget.between(low, high)]
        _scatter_outcomes(ax, mine.assign(level=0), "budget", "level")
        for edge in edges:
            if low <= edge["below"] <= high:
                ax.axvline(edge["below"] + 0.5, color="black", lw=0.8, ls="--")
        ax.set_yticks([])
        ax.set_title(
            f"{policy}: {region['failing']} failing samples, "
            f"{low / peak:.4f}–{high / peak:.4f} of peak",
            fontsize=9,
        )
        ax.set_xlabel("budget (bytes); dashed: exact edges")
    _legend(fig, axes)
    fig.suptitle(f"{trace}: hole regions")
    return fig


def overheads(rows: pd.DataFrame, trace: str):
    """Overhead of completed runs against budget ratio, one line per policy."""
    done = rows[rows.outcome == "ok"]
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
        fig.savefig(path, **FORMATS[path.suffix])
    plt.close(fig)
    return paths


def plot_trace(records: list[dict], holes: list[dict], peak: int, trace: str, out: Path) -> None:
    """All three figures of one trace under `out` (cliffs, zoom and overhead, PNG and PDF), from
    the rows of the records and holes tables."""
    rows = sampled(pd.DataFrame(records), trace)
    table = pd.DataFrame(holes)
    mine = table[table.trace == trace]
    save(cliffs(rows, mine, peak, trace), out / f"cliffs-{trace}")
    save(zooms(rows, mine, peak, trace), out / f"zoom-{trace}")
    save(overheads(rows, trace), out / f"overhead-{trace}")


def explanation(
    x: dict, stem: Path, rows: int = 18, suffixes: tuple[str, ...] = (".png", ".pdf")
) -> list[Path]:
    """One explained pair: the completing and the failing run side by side, one row per
    decisive step of the probe window (the last `rows` of them), naming what each step evicted
    and rematerialized; the retained storage in red, the failure marked."""
    runs = ("ok", "fail")
    by_step = {run: {s["step"]: s for s in x["probe"][run]["steps"]} for run in runs}
    steps = sorted(set().union(*by_step.values()))[-rows:]
    target = (x["retention"] or {}).get("storage")
    width, height = 11, 0.42 * len(steps) + 1.6
    fig, ax = plt.subplots(figsize=(width, height))
    # Margins in inches: the step labels on the left, the titles on top, and on the right
    # the cells' text running past the axes. tight_layout would draw the figure once more, a
    # fifth of its time (explanations draw hundreds).
    fig.subplots_adjust(
        left=1.0 / width, right=1 - 2.0 / width, bottom=0.1 / height, top=1 - 0.75 / height
    )
    for column, run in enumerate(runs):
        for row, step in enumerate(steps):
            cell = by_step[run].get(step)
            if cell is not None:
                _explanation_cell(ax, column, row, cell, target)
    ax.set_xlim(-0.05, 2)
    ax.set_ylim(len(steps) - 0.5, -0.5)
    ax.set_yticks(range(len(steps)), [f"step {s}" for s in steps])
    ax.set_xticks([0.45, 1.45], [_run_title(x[run], run) for run in runs])
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ("right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.axvline(0.97, color="#cccccc", lw=0.8)
    fig.suptitle(
        f"{x['trace']} · {x['policy']}: why {x['fail']['budget']:,} bytes fails where"
        f" {x['ok']['budget']:,} completes (retained storage in red)",
        fontsize=10,
    )
    return save(fig, stem, suffixes, tight=False)


def _run_title(run: dict, name: str) -> str:
    ratio = f" ({run['ratio']:.4f} of peak)" if run["ratio"] is not None else ""
    label = "completes" if name == "ok" else run["outcome"].upper()
    return f"{run['budget']:,} bytes{ratio}: {label}"


def _explanation_cell(ax, column: int, row: int, cell: dict, target: str | None) -> None:
    evicted = cell["evicted"]
    text = "evicts " + ", ".join(evicted[:4]) + (" …" if len(evicted) > 4 else "")
    text = text if evicted else ""
    if cell["remats"]:
        text += f"  · {cell['remats']} remats, depth {cell['depth']}"
    if "failed" in cell:
        f = cell["failed"]
        text += f"  · {f['outcome'].upper()} at op {f['op']}, depth {f['depth']}"
    colour = "#c0392b" if target in evicted or "failed" in cell else "black"
    # Storage names such as x1$$ are text, not mathtext.
    ax.text(
        column, row, text.strip(" ·"), va="center", fontsize=7.5, color=colour, parse_math=False
    )


MAP_COLOURS = {"ok": "#1b9e77", "oom": "#d95f02", "thrashed": "#7570b3"}
UNCOVERED_COLOUR = "#bbbbbb"  # uncovered or timed out: no known outcome
ZOOMS = 8  # hole zooms per figure: the widest holes


def map_strips(found: list, trace: str):
    """One strip per policy, each tile coloured by outcome along the budget ratio, then zooms
    (in bytes) on the widest holes with two widths of context either side."""
    from dtrholes import maps  # the map tables' module, kept out of the plotting imports above

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
