"""The comparison a person looks at first: per model, one panel per size (and dtype, device, loss
form), one horizontal bar per series: its fwd+bwd median on a linear axis from zero (lengths compare
as the times do) with the interquartile range as whiskers, the vendor layer of its framework marked
(hatched bar, dashed line at its median), and beside each bar its speed-up over that vendor layer,
its first call (trace + compile + run), the memory its training step saves for backward and its %
of the GEMM peak where known. The panel's title names its recommended driver: the fastest whose
gradients agreed (status ok).

A row that has no speed number (it failed, reproduced a known issue, could not decide, was
skipped) is a labelled gap: its series keeps its place on the axis with its status written there,
and no bar is drawn for it whatever its record holds. A driver that has an applicable row in
another panel of the same model but no record in this one is a gap too ("no record"), with the
reason a caller knows (gap_why, e.g. a run cut during its first call). Rows that do not apply
here (unavailable: e.g. a vendor LSTM on an Elman model) are counted under the panel, not drawn.
A row timed under contention (marks.contention) carries CONTENDED_MARK. Sweep records are drawn
by the time-vs-size charts instead (overview.py). Each driver has its look in every chart
(style.driver_style).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from rnnbench import results_file
from rnnbench.report.charts.style import (
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
from rnnbench.report.labels import saved_mb
from rnnbench.report.marks import CONTENDED_MARK, contention
from rnnbench.report.ratios import speedup, speedup_label

GAP_COLOR = "#b00000"


NOTE_ROOM = 0.62  # the longest bar (its whisker) ends here, as a fraction of the axis: its note fits beside it
LINEAR_SPREAD = 20.0  # slowest / fastest median up to which a panel's time axis is linear
LOG_MARGIN = 1.25  # a log axis runs this factor past the whiskers on both sides


class BarRow(NamedTuple):
    """One series in one panel: its times (None for a gap) and what is written beside it."""

    series: Series
    status: str
    anchor: bool
    median_ms: float | None = None
    q1_ms: float | None = None
    q3_ms: float | None = None
    vs_vendor: float | None = None  # ratios.speedup over the vendor layer (>1: faster than it)
    pct_peak: float | None = None
    first_call_s: float | None = None
    saved_mb: float | None = None  # what its training step saves for backward (record field step_memory)
    contended: bool = False
    unstable: bool = False  # its samples disagree (record field timing.unstable)

    @property
    def timed(self) -> bool:
        return self.median_ms is not None


def timed(rec: dict) -> bool:
    """Whether a record may be drawn as a bar: its gradients agreed (status ok) and it was timed."""
    return rec["status"] == "ok" and bool(rec.get("fwd_bwd"))


def contended(rec: dict) -> bool:
    """Whether other work ran beside a row while it was timed (timing.contended, or the notes of
    its cpu record in records written before that field)."""
    return bool((rec.get("timing") or {}).get("contended")) or bool(contention(rec))


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


def _bar(r: dict, name, vendor: dict) -> BarRow:
    fb = r["fwd_bwd"]
    ref = vendor.get((r.get("framework_family") or r["framework"], name(r).machine))
    frac = ((r.get("roofline") or {}).get("fwd_bwd") or {}).get("fraction_of_peak")
    return BarRow(
        name(r),
        status="ok",
        anchor=bool(r.get("anchor")),
        median_ms=fb["median_ms"],
        q1_ms=fb["q1_ms"],
        q3_ms=fb["q3_ms"],
        vs_vendor=speedup(fb["median_ms"], ref) if ref and not r.get("anchor") else None,
        pct_peak=100 * frac if frac is not None else None,
        first_call_s=r.get("first_call_s"),
        saved_mb=saved_mb(r),
        contended=contended(r),
        unstable=bool((r.get("timing") or {}).get("unstable")),
    )


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
            status = r["status"] if r["status"] != "ok" else "ok, not timed"
            out.append(BarRow(name(r), status, bool(r.get("anchor")), first_call_s=r.get("first_call_s")))
            continue
        out.append(_bar(r, name, vendor))
    out.sort(key=lambda b: (not b.timed, b.median_ms or 0.0, b.series))
    return out, sum(r["status"] == "unavailable" for r in rows)


def recommended(bars: list[BarRow]) -> BarRow | None:
    """The panel's recommended driver: the fastest row whose gradients agreed (only ok rows are timed)."""
    return min((b for b in bars if b.timed), key=lambda b: b.median_ms, default=None)


def missing_rows(
    drawn: dict[tuple, list[BarRow]], present: Mapping[tuple, set[Series]], gap_why: Mapping[str, str] = {}
) -> dict[tuple, list[BarRow]]:
    """Each panel's bars plus a gap for every series that has a bar or gap in another panel of the
    same model (key[0]) but no record at all in this one (present[key]: the series of every record
    of the panel, unavailable ones included): status "no record: <why>" (gap_why[driver], or that
    these records hold none)."""
    seen: dict[str, set[tuple[Series, bool]]] = defaultdict(set)
    for key, bars in drawn.items():
        seen[key[0]] |= {(b.series, b.anchor) for b in bars}
    out = {}
    for key, bars in drawn.items():
        here = present[key]
        gaps = [
            BarRow(s, "no record: " + gap_why.get(s.driver, "none in these records"), anchor)
            for s, anchor in sorted(seen[key[0]], key=str)
            if s not in here
        ]
        out[key] = bars + gaps
    return out


def _fmt_ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.3g} ms"  # no 1.76e+03


def _fmt_mb(mb: float) -> str:
    return f"{mb / 1024:.3g} GiB" if mb >= 1024 else f"{mb:.3g} MiB"


def _note(b: BarRow, best_ms: float | None = None) -> str:
    """Two lines beside a bar: its median (contention mark), speed-up over the vendor layer (and,
    on a log axis, over the panel's fastest: lengths there do not compare) and % of peak; its first
    call and the memory its step saves for backward."""
    first = [_fmt_ms(b.median_ms) + (f" {CONTENDED_MARK}" if b.contended else "") + (" unstable" if b.unstable else "")]
    if best_ms is not None and b.median_ms != best_ms:
        first.append(f"{speedup_label(speedup(b.median_ms, best_ms))} fastest")
    if b.vs_vendor is not None:
        first.append(f"{speedup_label(b.vs_vendor)} vendor")
    if b.pct_peak is not None:
        first.append(f"{b.pct_peak:.2g}% peak")
    second = []
    if b.first_call_s is not None:
        second.append(f"1st call {b.first_call_s:.3g} s")
    if b.saved_mb is not None:
        second.append(f"saves {_fmt_mb(b.saved_mb)}")
    return " | ".join(first) + ("\n" + " | ".join(second) if second else "")


def _gap(ax, y: int, b: BarRow) -> None:
    text = b.status if b.status.startswith("no record") else f"no time: {b.status}"
    if b.first_call_s is not None:
        text += f" (1st call {b.first_call_s:.3g} s)"
    ax.text(0.01, y, text, transform=ax.get_yaxis_transform(), va="center", ha="left", fontsize=7.5, color=GAP_COLOR)


def _plain_log_ticks(axis, decades: float) -> None:
    """Major ticks at 1-2-5 (1 only over more than four decades) labelled as plain numbers, no
    minor labels: matplotlib labels minor ticks of a short log range in 2x10^3 form, and they overlap."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if decades > 4 else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(FormatStrFormatter("%g"))
    axis.set_minor_formatter(NullFormatter())


def time_axis(bars: list[BarRow]) -> tuple[bool, float, float]:
    """(log?, lo, hi) of a panel's time axis: linear from 0 while the slowest median is at most
    LINEAR_SPREAD times the fastest, its notes beside the bars (the longest whisker ends at
    NOTE_ROOM of the axis); log otherwise (a linear axis would show the fast bars as slivers), its
    limits a margin around the whiskers and its notes in a column right of the axes."""
    timed_bars = [b for b in bars if b.timed]
    if not timed_bars:
        return False, 0.0, 1.0
    longest = max(b.q3_ms for b in timed_bars)
    medians = [b.median_ms for b in timed_bars]
    if max(medians) <= LINEAR_SPREAD * min(medians):
        return False, 0.0, longest / NOTE_ROOM
    return True, min(b.q1_ms for b in timed_bars) / LOG_MARGIN, longest * LOG_MARGIN


def draw_panel(ax, bars: list[BarRow], look: dict[Series, Style], *, title: str, unavailable: int) -> None:
    """Draw one panel: a bar (median, IQR whiskers) for each timed BarRow only, a labelled gap for
    the others, on the time axis of time_axis()."""
    log, lo, hi = time_axis(bars)
    best = recommended(bars)
    for y, b in enumerate(bars):
        style = look[b.series]
        if not b.timed:
            _gap(ax, y, b)
            continue
        hatch = VENDOR_HATCH if b.anchor else style.hatch
        ax.barh(
            y,
            b.median_ms - (lo if log else 0.0),
            left=lo if log else 0.0,
            height=0.7,
            color=style.color,
            edgecolor="black",
            linewidth=0.4,
            hatch=hatch or None,
            hatchcolor=ink_on(style.color),
            xerr=[[b.median_ms - b.q1_ms], [b.q3_ms - b.median_ms]],
            error_kw=dict(ecolor="black", capsize=3, lw=1),
        )
        if log:
            ax.text(
                1.01,
                y,
                _note(b, best.median_ms if best else None),
                transform=ax.get_yaxis_transform(),
                va="center",
                ha="left",
                fontsize=7,
                linespacing=1.0,
            )
        else:
            ax.text(b.q3_ms + hi * 0.01, y, _note(b), va="center", ha="left", fontsize=7, linespacing=1.0)
        if b.anchor:
            ax.axvline(b.median_ms, color=style.color, ls="--", lw=1)
    if log:
        ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    if log:
        _plain_log_ticks(ax.xaxis, decades=math.log10(hi / lo))
    ax.tick_params(axis="x", labelsize=8)
    ax.set_ylim(len(bars) - 0.5, -0.5)
    ax.set_yticks(range(len(bars)), [b.series.label + (" [vendor]" if b.anchor else "") for b in bars], fontsize=8)
    for tick, b in zip(ax.get_yticklabels(), bars):
        if not b.timed:
            tick.set_color(GAP_COLOR)
    ax.grid(True, axis="x", which="both" if log else "major", alpha=0.3)
    not_here = f"; {unavailable} row(s) not applicable here" if unavailable else ""
    scale = f"log: times {LINEAR_SPREAD:g}x apart or more, compare the printed ratios" if log else "linear from 0"
    ax.set_xlabel(f"fwd+bwd median ms ({scale}; whiskers: IQR)" + not_here, fontsize=8)
    pick = f"\nrecommended (fastest correct): {best.series.driver}" if best else "\nno driver timed correct here"
    ax.set_title(title + pick, fontsize=9)


def bar_chart(records: list[dict], model: str, out: Path) -> Path | None:
    """bars_<model>.png: one panel per size of `model` (non-sweep records); None when it has none."""
    groups = {(model, *k): rows for k, rows in panels(records, model).items()}
    return figure(records, groups, out / f"bars_{model}.png", title=f"{model}: {TITLE_TAIL}")


TITLE_TAIL = (
    "fwd+bwd time by driver (shorter is faster). Hatched: the vendor layer of the row's framework; "
    "'x vendor' = the vendor layer's median / the row's (>1: faster than it)"
)


def _legend_lines(every: list[BarRow]) -> str:
    """What the marks beside the bars mean, for those the figure uses."""
    lines = []
    if any(b.first_call_s is not None for b in every):
        lines.append("1st call: trace + compile + run, cold process")
    if any(b.saved_mb is not None for b in every):
        lines.append("saves: bytes the training step keeps for backward (docs/measuring.md#step-memory)")
    elif every:
        lines.append("memory saved for backward: not measured in these records")
    if any(b.contended for b in every):
        lines.append(f"{CONTENDED_MARK}: timed under contention (other work on its CPUs), compare with care")
    if any(b.unstable for b in every):
        lines.append("unstable: its samples disagree (timing.unstable)")
    return "; ".join(lines)


def figure(
    records: list[dict],
    groups: dict[tuple, list[dict]],
    path: Path,
    *,
    title: str,
    cols: int = 2,
    gap_why: Mapping[str, str] = {},
) -> Path | None:
    """One panel per (model, sizes, dtype, device, loss) group, in the given order, styled from
    the set of series of the whole figure; None when no group has a row that applies. A driver
    missing from a panel is a gap (missing_rows; gap_why: driver -> why it has no record)."""
    name = series_namer(records)
    drawn = {k: bar_rows(rows, name) for k, rows in groups.items()}
    drawn = {k: v for k, v in drawn.items() if v[0]}  # a panel of rows that all do not apply is no panel
    if not drawn:
        return None
    present = {k: {name(r) for r in groups[k]} for k in drawn}
    full = missing_rows({k: bars for k, (bars, _) in drawn.items()}, present, gap_why)
    every = [b for bars in full.values() for b in bars]
    look = styles(b.series for b in every)
    cols = min(cols, len(drawn))
    rows_of = [len(bars) for bars in full.values()]
    height = sum(max(rows_of[i : i + cols]) * 0.42 + 1.5 for i in range(0, len(rows_of), cols)) + 1.0
    fig, axes = pyplot().subplots(
        math.ceil(len(drawn) / cols), cols, figsize=(9.5 * cols, height), squeeze=False, layout="constrained", dpi=DPI
    )
    for ax, (key, bars) in zip(axes.flat, full.items()):
        model, sizes, dtype, device, loss = key
        head = f"{model}  {sizes}  {dtype}  {device}" + ("" if loss == "model" else f"  loss {loss}")
        draw_panel(ax, bars, look, title=head, unavailable=drawn[key][1])
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    fig.suptitle(wrap(title + "\n" + _legend_lines(every), 9.5 * cols), fontsize=10)
    return save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    """python -m rnnbench.report.charts.bars OUT.png RECORDS... --sizes T=512,H=512 --models lstm,rnn --title TEXT:
    the panels of the given models whose sizes include the given ones (a README chart)."""
    parser = argparse.ArgumentParser(prog="python -m rnnbench.report.charts.bars")
    parser.add_argument("out", type=Path)
    parser.add_argument("records", type=Path, nargs="+")
    parser.add_argument("--models", required=True)
    parser.add_argument("--sizes", default="", help="keep panels whose sizes include these, e.g. T=512,H=512")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--title", required=True)
    parser.add_argument("--cols", type=int, default=2)
    parser.add_argument(
        "--gap-why",
        action="append",
        default=[],
        metavar="DRIVER=TEXT",
        help="why DRIVER has no record in some panel (e.g. its run was cut), written in its gap",
    )
    args = parser.parse_args(argv)
    bad = next((item for item in args.gap_why if "=" not in item), None)
    if bad is not None:
        parser.error(f"--gap-why {bad!r}: expected DRIVER=TEXT")
    gap_why = dict(item.split("=", 1) for item in args.gap_why)
    records = latest_rows(results_file.load(args.records))
    want = {f"{k}={v}" for k, v in (item.split("=") for item in args.sizes.split(",") if item)}
    groups = {
        (m, *k): rows
        for m in args.models.split(",")
        for k, rows in panels(records, m).items()
        if want <= set(k[0].split(",")) and k[1] == args.dtype
    }
    return 0 if figure(records, groups, args.out, title=args.title, cols=args.cols, gap_why=gap_why) else 1


if __name__ == "__main__":
    import sys

    sys.exit(main())
