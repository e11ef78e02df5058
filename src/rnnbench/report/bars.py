"""The comparison a person looks at first: per model, one panel per size (and dtype, device, loss
form), one horizontal bar per series: its fwd+bwd median on a log axis with the interquartile range
as whiskers, the vendor layer of its framework marked (hatched bar, dashed line at its median), and
beside each bar its speed-up over that vendor layer and its % of the GEMM peak where known.

A row that has no speed number (it failed, reproduced a known issue, could not decide, was
skipped) is a labelled gap: its series keeps its place on the axis with its status written there,
and no bar is drawn for it whatever its record holds. Rows that do not apply here (unavailable:
e.g. a vendor LSTM on an Elman model) are counted under the panel, not drawn. Sweep records are
drawn by the time-vs-size charts instead (charts.py).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

from rnnbench import record
from rnnbench.report.style import (
    DPI,
    VENDOR_HATCH,
    Series,
    Style,
    ink_on,
    latest_rows,
    pyplot,
    save_png,
    series_namer,
    styles,
    wrap,
)

GAP_COLOR = "#b00000"


class BarRow(NamedTuple):
    """One series in one panel: its times (None for a gap) and what is written beside it."""

    series: Series
    status: str
    anchor: bool
    median_ms: float | None = None
    q1_ms: float | None = None
    q3_ms: float | None = None
    vs_vendor: float | None = None  # vendor median / this median (>1: faster than the vendor layer)
    pct_peak: float | None = None

    @property
    def timed(self) -> bool:
        return self.median_ms is not None


def timed(rec: dict) -> bool:
    """Whether a record may be drawn as a bar: its gradients agreed (status ok) and it was timed."""
    return rec["status"] == "ok" and bool(rec.get("fwd_bwd"))


def _sizes_text(sizes: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def panels(records: list[dict], model: str) -> dict[tuple, list[dict]]:
    """The non-sweep records of `model` by panel: (sizes text, dtype, device, loss form), in order
    of size. Rows of a run that timed nothing (--no-time) are left out: there is nothing to compare."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        if r["model"] == model and "sweep" not in r and (r.get("settings") or {}).get("time", True):
            key = (_sizes_text(r.get("sizes") or {}), r["dtype"], r.get("device", "cpu"), r.get("loss_form", "model"))
            out[key].append(r)
    order = lambda key: (tuple(sorted((out[key][0].get("sizes") or {}).items())), key[1:])
    return {k: out[k] for k in sorted(out, key=order)}


def bar_rows(rows: list[dict], name) -> tuple[list[BarRow], int]:
    """The bars and gaps of one panel (fastest first, gaps last) and how many rows were unavailable.
    `name` is the series namer of all records (style.series_namer)."""
    vendor: dict[tuple[str, str], float] = {}
    for r in rows:
        if r.get("anchor") and timed(r):
            vendor[(r.get("framework_family") or r["framework"], name(r).machine)] = r["fwd_bwd"]["median_ms"]
    out = []
    for r in rows:
        if r["status"] == "unavailable":
            continue
        if not timed(r):
            out.append(BarRow(name(r), r["status"] if r["status"] != "ok" else "ok, not timed", bool(r.get("anchor"))))
            continue
        fb = r["fwd_bwd"]
        ref = vendor.get((r.get("framework_family") or r["framework"], name(r).machine))
        frac = ((r.get("roofline") or {}).get("fwd_bwd") or {}).get("fraction_of_peak")
        out.append(
            BarRow(
                name(r),
                "ok",
                bool(r.get("anchor")),
                fb["median_ms"],
                fb["q1_ms"],
                fb["q3_ms"],
                ref / fb["median_ms"] if ref and not r.get("anchor") else None,
                100 * frac if frac is not None else None,
            )
        )
    out.sort(key=lambda b: (not b.timed, b.median_ms or 0.0, b.series))
    return out, sum(r["status"] == "unavailable" for r in rows)


def _note(b: BarRow) -> str:
    parts = [f"{b.median_ms:.0f} ms" if b.median_ms >= 100 else f"{b.median_ms:.3g} ms"]  # no 1.76e+03
    if b.vs_vendor is not None:
        parts.append(f"{b.vs_vendor:.2f}x vendor")
    if b.pct_peak is not None:
        parts.append(f"{b.pct_peak:.2g}% peak")
    return "  " + " | ".join(parts)


def _plain_log_ticks(axis, decades: float) -> None:
    """Major ticks at 1-2-5 (1 only over more than four decades) labelled as plain numbers, no
    minor labels: matplotlib labels minor ticks of a short log range in 2x10^3 form, and they overlap."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if decades > 4 else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(FormatStrFormatter("%g"))
    axis.set_minor_formatter(NullFormatter())
    axis.set_tick_params(labelsize=8)


def draw_panel(ax, bars: list[BarRow], look: dict[Series, Style], title: str, unavailable: int) -> None:
    """Draw one panel: a bar (median, IQR whiskers) for each timed BarRow only, a labelled gap for
    the others."""
    times = [t for b in bars if b.timed for t in (b.q1_ms, b.q3_ms, b.median_ms)]
    lo, hi = (min(times) / 2.5, max(times) * 12) if times else (0.1, 10.0)
    for y, b in enumerate(bars):
        style = look[b.series]
        if not b.timed:
            ax.text(
                lo * 1.1,
                y,
                f"no time: {b.status}",
                va="center",
                ha="left",
                fontsize=7.5,
                color=GAP_COLOR,
                fontweight="bold",
            )
            continue
        hatch = VENDOR_HATCH if b.anchor else style.hatch
        ax.barh(
            y,
            b.median_ms,
            height=0.7,
            color=style.color,
            edgecolor="black",
            linewidth=0.4,
            hatch=hatch or None,
            hatchcolor=ink_on(style.color),
            xerr=[[b.median_ms - b.q1_ms], [b.q3_ms - b.median_ms]],
            error_kw=dict(ecolor="black", capsize=3, lw=1),
        )
        ax.text(b.q3_ms * 1.05, y, _note(b), va="center", ha="left", fontsize=7.5)
        if b.anchor:
            ax.axvline(b.median_ms, color=style.color, ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    _plain_log_ticks(ax.xaxis, decades=math.log10(hi / lo))
    ax.set_ylim(len(bars) - 0.5, -0.5)
    ax.set_yticks(range(len(bars)), [b.series.label + (" [vendor]" if b.anchor else "") for b in bars], fontsize=8)
    for tick, b in zip(ax.get_yticklabels(), bars):
        if not b.timed:
            tick.set_color(GAP_COLOR)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    not_here = f"; {unavailable} row(s) not applicable here" if unavailable else ""
    ax.set_xlabel("fwd+bwd median ms (log; whiskers: IQR)" + not_here, fontsize=8)
    ax.set_title(title, fontsize=9)


def bar_chart(records: list[dict], model: str, out: Path) -> Path | None:
    """bars_<model>.png: one panel per size of `model` (non-sweep records); None when it has none."""
    groups = {(model, *k): rows for k, rows in panels(records, model).items()}
    return figure(
        records,
        groups,
        out / f"bars_{model}.png",
        f"{model}: fwd+bwd time by driver (shorter is faster). Hatched: the vendor layer of the row's "
        "framework; 'x vendor' = its median / the row's (>1: faster than it)",
    )


def figure(records: list[dict], groups: dict[tuple, list[dict]], path: Path, title: str, cols: int = 2) -> Path | None:
    """One panel per (model, sizes, dtype, device, loss) group, in the given order, styled from
    the set of series of the whole figure; None when no group has a row that applies."""
    name = series_namer(records)
    drawn = {k: bar_rows(rows, name) for k, rows in groups.items()}
    drawn = {k: v for k, v in drawn.items() if v[0]}  # a panel of rows that all do not apply is no panel
    if not drawn:
        return None
    every = [b for bars, _ in drawn.values() for b in bars]
    look = styles((b.series for b in every), first=(b.series for b in every if b.anchor))
    cols = min(cols, len(drawn))
    rows_of = [len(bars) for bars, _ in drawn.values()]
    height = sum(max(rows_of[i : i + cols]) * 0.32 + 1.3 for i in range(0, len(rows_of), cols)) + 0.8
    fig, axes = pyplot().subplots(
        math.ceil(len(drawn) / cols), cols, figsize=(8 * cols, height), squeeze=False, layout="constrained", dpi=DPI
    )
    for ax, ((model, sizes, dtype, device, loss), (bars, unavailable)) in zip(axes.flat, drawn.items()):
        head = f"{model}  {sizes}  {dtype}  {device}" + ("" if loss == "model" else f"  loss {loss}")
        draw_panel(ax, bars, look, head, unavailable)
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    fig.suptitle(wrap(title, 8 * cols), fontsize=10)
    return save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    """python -m rnnbench.report.bars OUT.png RECORDS... --sizes T=512,H=512 --models lstm,rnn --title TEXT:
    the panels of the given models whose sizes include the given ones (a README chart)."""
    parser = argparse.ArgumentParser(prog="python -m rnnbench.report.bars")
    parser.add_argument("out", type=Path)
    parser.add_argument("records", type=Path, nargs="+")
    parser.add_argument("--models", required=True)
    parser.add_argument("--sizes", default="", help="keep panels whose sizes include these, e.g. T=512,H=512")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--title", required=True)
    parser.add_argument("--cols", type=int, default=2)
    args = parser.parse_args(argv)
    records = latest_rows(record.load(args.records))
    want = {f"{k}={v}" for k, v in (item.split("=") for item in args.sizes.split(",") if item)}
    groups = {
        (m, *k): rows
        for m in args.models.split(",")
        for k, rows in panels(records, m).items()
        if want <= set(k[0].split(",")) and k[1] == args.dtype
    }
    return 0 if figure(records, groups, args.out, args.title, args.cols) else 1


if __name__ == "__main__":
    import sys

    sys.exit(main())
