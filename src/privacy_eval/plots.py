"""The report's figures (PNG), drawn by the metrics' report sections.

Figures are drawn on `matplotlib.figure.Figure` objects (the Agg renderer, no pyplot,
no change to the caller's global backend) inside matplotlib's default style, at a
fixed size and dpi, with no software version in the PNG metadata: the same rows give
the same bytes. matplotlib is an optional dependency (`pip install privacy-eval[report]`):
only `--report` imports this module.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib.style
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from privacy_eval.formatting import fmt, is_number
from privacy_eval.results import ColumnRow, MetricRow

_DPI = 100
_WIDTH = 8.0  # inches
_PASS_COLOUR, _FAIL_COLOUR, _TARGET_COLOUR = "#4c72b0", "#c44e52", "#222222"
_METHOD_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#8172b3")
# Matplotlib's defaults, whatever the caller's matplotlibrc says, and never mathtext:
# a column name with two `$` in it is a name, not a formula.
_STYLE = ["default", {"font.size": 10, "figure.titlesize": 11, "axes.spines.top": False,
                      "axes.spines.right": False, "text.parse_math": False}]
_LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 1}  # readable where the target line crosses
_MAX_LABEL = 32  # characters of a column name on a figure axis (the tables keep it whole)




@contextmanager
def _figure(path: Path, title: str, height: float = 4.0) -> Iterator[tuple[Figure, Axes]]:
    """One figure with one axes in the fixed style, saved to `path` when the block ends."""
    with matplotlib.style.context(_STYLE):
        fig = Figure(figsize=(_WIDTH, height), dpi=_DPI, layout="constrained")
        # On the figure, not the axes: centred over the axes, a title runs off the right
        # edge when long column names push the axes right.
        fig.suptitle(title)
        yield fig, fig.add_subplot()
        # No "Software" entry: the bytes do not change with the matplotlib version string.
        fig.savefig(path, format="png", dpi=_DPI, metadata={"Software": None})


def column_figure(path: Path, ranked: Sequence[ColumnRow], target: float | None) -> None:
    title = "Column Direct Match Protection per column (most re-identifying first)"
    with _figure(path, title, height=max(3.0, 1.4 + 0.3 * len(ranked))) as (fig, ax):
        y = range(len(ranked))
        colours = [_FAIL_COLOUR if c.below_target else _PASS_COLOUR for c in ranked]
        bars = ax.barh(y, [c.protection for c in ranked], color=colours, height=0.7)
        ax.bar_label(bars, labels=[fmt(c.protection, 1) for c in ranked], padding=3, fontsize=8, bbox=_LABEL_BOX)
        ax.set_yticks(list(y), [short(c.column_name) for c in ranked])
        for label, c in zip(ax.get_yticklabels(), ranked):
            if c.below_target:  # a bar near 0 is invisible; its name still stands out
                label.set_color(_FAIL_COLOUR)
        ax.invert_yaxis()  # rank 1 on top
        ax.set_xlim(0, 110)  # room for the labels of bars at 100
        ax.set_xticks(range(0, 101, 20))
        ax.set_xlabel("P_c (%): higher protects more")
        if target is not None:
            ax.axvline(target, color=_TARGET_COLOUR, linestyle="--", linewidth=1.5, label=f"target ≥ {target:g} %")
            _legend(fig, ax, [Patch(color=_FAIL_COLOUR, label="below target"),
                              Patch(color=_PASS_COLOUR, label="at or above target")])


def linkage_rate_figure(path: Path, methods: Sequence[str], rows: Sequence[MetricRow], target: float | None) -> None:
    success = [_rate(m.details, "success_rate") for m in rows]
    baseline = [_rate(m.details, "baseline_random") for m in rows]
    title = "Linkage attack: success rate vs random guessing within the candidates"
    with _figure(path, title) as (fig, ax):
        x = range(len(methods))
        width = 0.38
        for offset, values, label, colour in ((-width / 2, success, "success rate", _FAIL_COLOUR),
                                              (width / 2, baseline, "random baseline", "#8c8c8c")):
            bars = ax.bar([i + offset for i in x], values, width, label=label, color=colour)
            ax.bar_label(bars, labels=[fmt(v, 4) for v in values], padding=2, fontsize=8, bbox=_LABEL_BOX)
        ax.set_xticks(list(x), [_method_label(name, m) for name, m in zip(methods, rows)])
        top = max([*success, *baseline, target or 0.0, 0.01])
        ax.set_ylim(0, top * 1.25)  # room for the value labels
        ax.set_ylabel("share of synthetic records linked (0-1)")
        if target is not None:
            ax.axhline(target, color=_TARGET_COLOUR, linestyle="--", linewidth=1.5, label=f"target ≤ {target:g}")
        _legend(fig, ax)


def top_k_figure(path: Path, methods: Sequence[str], top_k: Sequence[Mapping[int, float]]) -> None:
    with _figure(path, "Linkage attack: top-k hit rate") as (fig, ax):
        for method, hits, colour in zip(methods, top_k, itertools.cycle(_METHOD_COLOURS)):
            if hits:
                ks = sorted(hits)
                ax.plot(ks, [hits[k] for k in ks], marker="o", color=colour, label=method)
        ks = sorted({k for hits in top_k for k in hits})
        ax.set_xticks(ks)
        peak = max(v for hits in top_k for v in hits.values())
        ax.set_ylim(0, min(1.05, max(peak, 0.01) * 1.2))  # rates are 0-1; zoom on small ones
        ax.set_xlabel("k (the true original among the k best-scored candidates)")
        ax.set_ylabel("hit rate (0-1)")
        ax.grid(alpha=0.3)
        _legend(fig, ax)


def distance_closest_figure(
    path: Path,
    edges: Sequence[float],
    counts: Sequence[int],
    zeros: int,
    dcr: float | None,
    p05: float | None,
    target: float | None,
) -> None:
    """Histogram of d1, each synthetic record's distance to its nearest original: the
    records with d1 > 0 in their bins, and those with d1 = 0 as a bar of their own left
    of the axis (a record that coincides with an original in the space)."""
    total = zeros + sum(counts)
    share = zeros / total if total else 0.0
    top = float(edges[-1]) if edges else 0.0
    width = top / len(counts) if counts and top > 0 else 1.0
    title = "Distance to closest record: each synthetic record's distance to its nearest original"
    with _figure(path, title) as (fig, ax):
        if top > 0:
            ax.bar([float(e) for e in edges[:-1]], list(counts), width=width, align="edge",
                   color=_PASS_COLOUR, edgecolor="white", linewidth=0.5, label="d1 > 0")
        zero = ax.bar([-1.5 * width], [zeros], width=width, color=_FAIL_COLOUR,
                      label=f"d1 = 0: synthetic records that coincide with an original ({100 * share:.1f} %)")
        ax.bar_label(zero, labels=[f"{zeros} ({100 * share:.1f} %)"], padding=2, fontsize=8, bbox=_LABEL_BOX)
        ax.axvline(-0.5 * width, color="#8c8c8c", linewidth=0.8)  # the zero bar is apart, not a bin
        for value, label, style in ((p05, "5 % quantile of d1", ":"), (dcr, "DCR (median of d1)", "-.")):
            if value is not None:  # a statistic of 0 lies in the zero bar, not at the start of the bins
                ax.axvline(value if value > 0 else -1.5 * width, color="#555555", linestyle=style, linewidth=1.2,
                           label=f"{label} = {fmt(value)}")
        if target is not None:
            ax.axvline(target, color=_TARGET_COLOUR, linestyle="--", linewidth=1.5, label=f"target ≥ {target:g}")
        right = max(top, target or 0.0, dcr or 0.0, width)
        ticks = [t for t in MaxNLocator(nbins=8).tick_values(0.0, right) if 0.0 <= t <= right * 1.0001]
        ax.set_xticks([-1.5 * width, *ticks], ["= 0", *(f"{t:g}" for t in ticks)])
        ax.set_xlim(-2.5 * width, right + width)
        peak = max([zeros, *counts, 1])
        ax.set_ylim(0, peak * 1.15)  # room for the zero bar's label
        ax.set_xlabel("d1: distance to the nearest original, in the space of the distance metrics")
        ax.set_ylabel("synthetic records")
        _legend_rows(fig, ax)


def local_cloaking_figure(
    path: Path,
    edges: Sequence[int],
    counts: Sequence[int],
    cap: int | None,
    capped: int,
    median: float | None,
    target: float | None,
    note: str | None = None,
) -> None:
    """Histogram of LC_i, per paired original the synthetic records at least as close
    to it as its own synthetic record (counted up to `cap`), bins [lo, hi)."""
    lows = [int(e) for e in edges[:-1]]
    widths = [int(b) - int(a) for a, b in zip(edges[:-1], edges[1:])]
    has_cap = cap is not None and capped > 0
    colours = [_FAIL_COLOUR if has_cap and lo <= cap < lo + w else _PASS_COLOUR for lo, w in zip(lows, widths)]
    title = "Local cloaking: synthetic records at least as close to an original as its own"
    if note:
        title += f" ({note})"
    with _figure(path, title) as (fig, ax):
        bars = ax.bar(lows, list(counts), width=widths, align="edge", color=colours, edgecolor="white", linewidth=0.5)
        if has_cap:  # the capped records' bin can be too low to see
            ax.bar_label(bars, labels=[f"{capped} capped" if c == _FAIL_COLOUR else "" for c in colours],
                         padding=2, fontsize=8)
        extra = [Patch(color=_PASS_COLOUR, label="paired originals per bin [lo, hi)")]
        if has_cap:
            extra.append(Patch(color=_FAIL_COLOUR, label=f"bin holding the {capped} capped at {cap}"))
        if median is not None:
            bound = cap is not None and median >= cap  # at least half the records capped
            label = f"local cloaking (median) ≥ {median:g}, a lower bound" if bound else f"local cloaking (median) = {median:g}"
            ax.axvline(median, color="#555555", linestyle="-.", linewidth=1.2, label=label)
        if target is not None:
            ax.axvline(target, color=_TARGET_COLOUR, linestyle="--", linewidth=1.5, label=f"target ≥ {target:g}")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=10, integer=True))
        right = max([int(edges[-1]) if edges else 1, int(target or 0) + 1, int(median or 0) + 1])
        ax.set_xlim(0, right)
        ax.set_ylim(0, max([*counts, 1]) * 1.1)
        ax.set_xlabel("LC_i: other synthetic records closer to the original than its own, or tied with it")
        ax.set_ylabel("paired originals")
        _legend_rows(fig, ax, extra)


def disclosure_figure(
    path: Path,
    targets: Sequence[tuple[str, float, float]],
    identity: tuple[float, float] | None,
    target: float | None,
) -> None:
    """One row per target, from what the original itself discloses (Dorig) to what the
    release discloses of it (DiSCO), and a row for identity (UiO to repU); percent of
    the original records."""
    rows = ([("identity: UiO → repU", *identity)] if identity is not None else []) + [
        (f"{short(name)}: Dorig → DiSCO", original, release) for name, original, release in targets
    ]
    title = "Disclosure: what the original discloses (grey) and what the release discloses of it"
    with _figure(path, title, height=max(2.5, 1.4 + 0.4 * len(rows))) as (fig, ax):
        y = range(len(rows))
        for i, (_, original, release) in enumerate(rows):
            ax.annotate("", xy=(release, i), xytext=(original, i),
                        arrowprops={"arrowstyle": "->", "color": "#8c8c8c", "linewidth": 1.2})
        ax.scatter([r[1] for r in rows], list(y), color="#8c8c8c", zorder=3, label="original (UiO, Dorig)")
        released = [r[2] for r in rows]
        judged = [i >= len(rows) - len(targets) for i in range(len(rows))]  # the target bounds DiSCO only
        colours = [_FAIL_COLOUR if target is not None and j and v > target else _PASS_COLOUR
                   for v, j in zip(released, judged)]
        ax.scatter(released, list(y), color=colours, zorder=3, label="release (repU, DiSCO)")
        for i, value in enumerate(released):
            ax.annotate(fmt(value, 2), (value, i), textcoords="offset points", xytext=(0, 7), ha="center",
                        fontsize=8, bbox=_LABEL_BOX)
        ax.set_yticks(list(y), [r[0] for r in rows])
        ax.invert_yaxis()
        ax.set_ylim(len(rows) - 0.4, -0.7)  # room for the value labels above the first row
        ax.set_xlim(-2, 102)
        ax.set_xlabel("percent of the original records: lower protects more")
        if target is not None:
            ax.axvline(target, color=_TARGET_COLOUR, linestyle="--", linewidth=1.5,
                       label=f"target ≤ {target:g} % (DiSCO)")
        ax.grid(axis="x", alpha=0.3)
        _legend(fig, ax)


def _method_label(name: str, row: MetricRow) -> str:
    lift = row.details.get("lift")
    note = f"lift {lift:.1f}×" if is_number(lift) else ""
    if row.status != "ok":
        note = short(row.status.replace("_", " "))
    return f"{name}\n({note})" if note else name


def _legend_rows(fig: Figure, ax: Axes, extra: Sequence[Patch] = ()) -> None:
    """As `_legend`, two entries a row: the distance figures' labels are long."""
    handles = [*extra, *ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)


def _legend(fig: Figure, ax: Axes, extra: Sequence[Patch] = ()) -> None:
    # Below the axes: inside, a legend can hide a bar or a point whatever corner it takes.
    handles = [*ax.get_legend_handles_labels()[0], *extra]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)




def short(name: str) -> str:
    """A column name for a figure axis: one line, cut to _MAX_LABEL characters."""
    name = " ".join(name.split())
    return name if len(name) <= _MAX_LABEL else name[: _MAX_LABEL - 1] + "…"


def _rate(details: Mapping[str, Any], key: str) -> float:
    """A rate to draw; 0 when it is missing or not a number."""
    value = details.get(key)
    return float(value) if is_number(value) else 0.0
