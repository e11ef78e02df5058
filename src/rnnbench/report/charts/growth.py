"""How time grows with the sequence length T, from rows of `rnnbench run` (not sweeps: those have
charts.time_chart): wherever a model's records hold the same other sizes at several T, one panel
per those sizes, one line per series (median, IQR band), a dotted slope-1 guide (a line steeper
than it grows faster than linearly in T). A series with no time at some T ends with an x there
and its legend entry says why; no point is drawn for it.

Also the idiomatic comparison's T sweep (rnnbench.study.idiomatic), drawn the same way.
"""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from pathlib import Path

from rnnbench.report.charts.bars import timed
from rnnbench.report.charts.style import (
    DPI,
    MARKERS,
    Style,
    driver_style,
    pyplot,
    readable_log_y,
    save_png,
    series_namer,
    styles,
    wrap,
)
from rnnbench.suites import MECHANISMS, VENDOR_LAYERS


def t_panels(records: list[dict], model: str) -> dict[tuple, list[dict]]:
    """Non-sweep, applicable records of `model` by (the sizes other than T, dtype, device, loss
    form), only where they hold at least two values of T."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        sizes = r.get("sizes") or {}
        if r["model"] != model or "sweep" in r or "T" not in sizes or r["status"] == "unavailable":
            continue
        rest = ",".join(f"{k}={v}" for k, v in sizes.items() if k != "T")
        out[(rest, r["dtype"], r.get("device", "cpu"), r.get("loss_form", "model"))].append(r)
    return {k: v for k, v in sorted(out.items()) if len({r["sizes"]["T"] for r in v}) > 1}


def _gap_note(gaps: list[dict], x_of) -> str:
    """' (no time at T=128,512: <status>)' per status, wrapped: the legend entry of a series with
    gaps (long statuses would squeeze the axes)."""
    if not gaps:
        return ""
    by_status: dict[str, list] = defaultdict(list)
    for r in gaps:
        by_status[r["status"]].append(x_of(r))
    text = "; ".join(f"no time at T={','.join(map(str, xs))}: {status}" for status, xs in by_status.items())
    return "\n" + textwrap.fill(f"({text})", 60)


def _lines(ax, rows: list[dict], name, *, look: dict, x_of=lambda r: r["sizes"]["T"]) -> list[float]:
    """One line per series of `rows` (timed points only), an x where a series has no time; returns
    the medians drawn."""
    by_series: dict = defaultdict(list)
    for r in rows:
        by_series[name(r)].append(r)
    drawn: list[float] = []
    for series, recs in sorted(by_series.items(), key=lambda kv: str(kv[0])):
        recs.sort(key=x_of)
        ok = [r for r in recs if timed(r)]
        gaps = [r for r in recs if not timed(r)]
        style: Style = look[series]
        label = getattr(series, "label", str(series)) + _gap_note(gaps, x_of)
        kw = dict(color=style.color, marker=style.marker, ms=5, lw=1.6, ls="--" if recs[0].get("anchor") else "-")
        if ok:
            xs, med = [x_of(r) for r in ok], [r["fwd_bwd"]["median_ms"] for r in ok]
            drawn += med
            ax.plot(xs, med, label=label, **kw)
            ax.fill_between(
                xs,
                [r["fwd_bwd"]["q1_ms"] for r in ok],
                [r["fwd_bwd"]["q3_ms"] for r in ok],
                color=style.color,
                alpha=0.15,
            )
            if gaps:  # where the line stops: the first T without a time (the legend lists them all)
                ax.plot([x_of(gaps[0])], [med[-1]], "x", color=style.color, ms=9, mew=2)
        else:
            ax.plot([], [], label=label, **kw)
    return drawn


def _finish(ax, ts: list[int], drawn: list[float], *, title: str, legend_below: bool = True) -> None:
    if drawn:
        ax.plot(ts, [min(drawn) * t / ts[0] for t in ts], ":", color="gray", lw=1, label="slope 1 (linear in T)")
    ax.set(xscale="log", yscale="log", xlabel="T (steps)", ylabel="fwd+bwd median ms (band: IQR)")
    ax.set_title(title, fontsize=9)
    if drawn:
        readable_log_y(ax)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xticks(ts, [str(t) for t in ts])
    ax.minorticks_off()
    if legend_below:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)  # below: lines stay visible
    else:
        ax.legend(fontsize=7, loc="upper left")


def t_growth_chart(records: list[dict], model: str, out: Path) -> Path | None:
    """tgrowth_<model>.png, or None when no sizes of `model` hold several T."""
    groups = t_panels(records, model)
    if not groups:
        return None
    name = series_namer(records)
    every = [r for rows in groups.values() for r in rows]
    look = styles(name(r) for r in every)
    cols = min(len(groups), 2)
    nrows = math.ceil(len(groups) / cols)
    fig, axes = pyplot().subplots(
        nrows, cols, figsize=(7.5 * cols, 5.5 * nrows), squeeze=False, layout="constrained", dpi=DPI
    )
    for ax, ((rest, dtype, device, loss), rows) in zip(axes.flat, groups.items()):
        drawn = _lines(ax, rows, name, look=look)
        title = f"{model}  {rest}  {dtype}  {device}" + ("" if loss == "model" else f"  loss {loss}")
        _finish(ax, sorted({r["sizes"]["T"] for r in rows}), drawn, title=title)
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    fig.suptitle(
        wrap(f"{model}: fwd+bwd time vs T (dashed: vendor layers; x: no time at that T, see legend)", 7.5 * cols),
        fontsize=10,
    )
    return save_png(fig, out / f"tgrowth_{model}.png")


def idiomatic_panels(rows: list[dict]) -> dict[str, list[dict]]:
    """The idiomatic T sweep faceted: per mechanism (suites.MECHANISMS) that has rows, its driver's
    rows, its own idiomatic family's ("idiomatic: <idiom>") and the vendor family's of its framework
    (a VENDOR_LAYERS family with the same framework_family): three lines a panel, not fifteen in one."""
    vendor_names = {f"idiomatic: {v.family}" for v in VENDOR_LAYERS}
    out: dict[str, list[dict]] = {}
    for m in MECHANISMS:
        own = [r for r in rows if r["driver"] == m.driver]
        if not own:
            continue
        family = own[0].get("framework_family") or own[0].get("framework")
        out[m.driver] = own + [
            r
            for r in rows
            if r["driver"] == f"idiomatic: {m.idiom}"
            or (r["driver"] in vendor_names and (r.get("framework_family") or r.get("framework")) == family)
        ]
    return out


def idiomatic_looks(rows: list[dict]) -> dict[str, Style]:
    """Each idiomatic family drawn in its mechanism's colour (a vendor family in its vendor layer's
    driver's), with the next marker: the pair reads as one colour, solid against dashed."""
    look = {r["driver"]: driver_style(r["driver"]) for r in rows}
    model = rows[0]["model"] if rows else ""
    for m in MECHANISMS:
        base = driver_style(m.driver)
        look[f"idiomatic: {m.idiom}"] = base._replace(marker=MARKERS[(MARKERS.index(base.marker) + 1) % len(MARKERS)])
    for v in VENDOR_LAYERS:
        layer = v.drivers.get(model)
        if layer:
            look[f"idiomatic: {v.family}"] = driver_style(layer)
    return look


def idiomatic_t_growth_chart(records: list[dict], path: Path) -> Path | None:
    """The T sweep of the idiomatic comparison (rnnbench.study.idiomatic): one panel per mechanism
    (idiomatic_panels), its driver solid, its idiomatic family and the vendor family dashed (each
    family at its fastest variant per T); one shared time axis, so panels compare."""
    rows = [r for r in records if (r.get("sizes") or {}).get("T")]
    groups = idiomatic_panels(rows)
    if not groups:
        return None
    look = idiomatic_looks(rows)
    cols = 2
    fig, axes = pyplot().subplots(
        math.ceil(len(groups) / cols),
        cols,
        figsize=(13, 3.6 * math.ceil(len(groups) / cols) + 1),
        squeeze=False,
        layout="constrained",
        dpi=DPI,
        sharex=True,
        sharey=True,
    )
    ts = sorted({r["sizes"]["T"] for r in rows})
    for ax, (mech, panel) in zip(axes.flat, groups.items()):
        # the baseline families are dashed (drawn as anchors), on copies: records are read, never changed
        drawn = _lines(
            ax, [dict(r, anchor=r["driver"].startswith("idiomatic")) for r in panel], lambda r: r["driver"], look=look
        )
        _finish(ax, ts, drawn, title=mech, legend_below=False)
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    first = rows[0]
    fixed = ", ".join(f"{k}={v}" for k, v in first["sizes"].items() if k != "T")
    fig.suptitle(
        wrap(
            f"{first['model']}: fwd+bwd time vs T ({fixed}, {first['dtype']}, "
            f"{(first.get('settings') or {}).get('threads', '?')} thread(s)); solid: rnnbench's mechanism, dashed: "
            "its idiomatic family and its framework's vendor layers (each at its fastest variant)",
            13,
        ),
        fontsize=10,
    )
    return save_png(fig, path)
