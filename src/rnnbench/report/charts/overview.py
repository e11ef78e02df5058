"""Charts (PNG, matplotlib Agg) from result records only: nothing here imports models or drivers.

Per model: fwd+bwd time vs trip count (log-log, one line per series, IQR band) beside the first
call (compile) time; speedup over the Python loop (torch_loop) as bars with a line at 1; time vs
hidden size when swept. Across models: a gradient-error heatmap (series x model, log colour scale,
non-ok cells labelled with their status) and the fraction of the GEMM peak reached (roofline).

A series is one driver in one environment (labelled by its records' own env_label, "torch 2.13.0",
"jax 0.10.2") and, when the records come from several machines, on one machine: two machines'
timings are never drawn as one line, averaged, or divided by each other (a speedup is over the
torch_loop of the same machine). style.series_namer() is the one place records are put into series.
Each chart styles the series it draws (style.chart_styles): colour x marker, so no two look alike.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from rnnbench.modes import VJP
from rnnbench.report.charts.bars import bar_chart
from rnnbench.report.charts.ceilings import ceilings_chart
from rnnbench.report.charts.growth import t_growth_chart
from rnnbench.report.charts.heatmap import grad_error_heatmap
from rnnbench.report.charts.mode_speed import mode_speed_chart
from rnnbench.report.charts.remat_price import remat_price_chart
from rnnbench.report.charts.style import (
    VENDOR_HATCH,
    Series,
    chart_styles,
    ink_on,
    pyplot,
    readable_log_y,
    save_png,
    series_namer,
    wrap,
)
from rnnbench.report.labels import machine_of, several_machines
from rnnbench.report.ratios import speedup, speedup_label
from rnnbench.suites import CHART_BASELINE

LENGTH_KEYS, HIDDEN_KEYS = ("T", "K"), ("H", "n")


def _key(sizes: dict, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in sizes), None)


def axis_records(records: list[dict], model: str, axis: str) -> dict[Series, list[dict]]:
    """Sweep records of `model` on `axis` ("length" or "hidden"), by series (driver, env label
    and, when `records` come from several machines, machine), in size order. The length axis
    also holds the row shared with the hidden axis (run once)."""
    keys = LENGTH_KEYS if axis == "length" else HIDDEN_KEYS
    name = series_namer(records)
    by_series: dict[Series, list[dict]] = defaultdict(list)
    for r in records:
        if r["model"] != model or "sweep" not in r or r["status"] == "unavailable":
            continue
        if r["sweep"]["axis"] != axis and not (axis == "hidden" and _shares_hidden_base(r, records)):
            continue
        by_series[name(r)].append(r)
    for rows in by_series.values():
        rows.sort(key=lambda r: r["sizes"][_key(r["sizes"], keys)])
    return dict(by_series)


def _shares_hidden_base(rec: dict, records: list[dict]) -> bool:
    """A length-axis row at the length its own machine swept the hidden axis at belongs on the
    hidden chart."""
    lk = _key(rec["sizes"], LENGTH_KEYS)
    hidden_lengths = {
        r["sizes"].get(lk)
        for r in records
        if r.get("sweep", {}).get("axis") == "hidden"
        and r["model"] == rec["model"]
        and machine_of(r) == machine_of(rec)
    }
    return rec["sizes"].get(lk) in hidden_lengths


def _not_run_note(rows: list[dict], key: str) -> str:
    bad = [r for r in rows if r["status"] != "ok"]
    if not bad:
        return ""
    statuses = sorted({r["status"] for r in bad})
    return f" ({'/'.join(statuses)} at {key}={','.join(str(r['sizes'][key]) for r in bad)})"


def time_chart(records: list[dict], model: str, axis: str, out: Path) -> Path | None:
    by_series = axis_records(records, model, axis)
    if not by_series:
        return None
    keys = LENGTH_KEYS if axis == "length" else HIDDEN_KEYS
    key = _key(next(iter(by_series.values()))[0]["sizes"], keys)
    fig, (ax_t, ax_c) = pyplot().subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.35, 1]})
    look = chart_styles(by_series)
    for series, rows in sorted(by_series.items()):
        ok = [r for r in rows if r["status"] == "ok" and r.get("fwd_bwd")]
        label = series.label + _not_run_note(rows, key)
        color = look[series].color
        style = dict(color=color, marker=look[series].marker, ms=4, lw=1.6, ls="--" if rows[0].get("anchor") else "-")
        if ok:
            x = [r["sizes"][key] for r in ok]
            med = [r["fwd_bwd"]["median_ms"] for r in ok]
            ax_t.plot(x, med, label=label, **style)
            ax_t.fill_between(
                x, [r["fwd_bwd"]["q1_ms"] for r in ok], [r["fwd_bwd"]["q3_ms"] for r in ok], color=color, alpha=0.15
            )
            ax_c.plot(x, [r["first_call_s"] for r in ok], **style)
        else:
            ax_t.plot([], [], label=label, **style)
        skipped = [r for r in rows if r["status"] != "ok"]
        if skipped and ok:  # mark where the line stops for a reason
            ax_t.plot([r["sizes"][key] for r in skipped], [max(med)] * len(skipped), "x", color=color, ms=8, mew=2)
    first = next(iter(by_series.values()))[0]
    fixed = ", ".join(f"{k}={v}" for k, v in first["sizes"].items() if k != key)
    ax_t.set(
        ylabel="fwd+bwd median ms (band: IQR)", title=f"{model}: fwd+bwd time vs {key} ({fixed}, {first['dtype']})"
    )
    ax_c.set(ylabel="seconds", title="first call: trace + compile + run (cold process)")
    for ax in (ax_t, ax_c):
        ax.set(xscale="log", yscale="log", xlabel=key)
        readable_log_y(ax)
        ax.grid(True, which="both", alpha=0.3)
        xs = sorted({r["sizes"][key] for rows in by_series.values() for r in rows})
        ax.set_xticks(xs, [str(v) for v in xs])
        ax.minorticks_off()
    ax_t.legend(fontsize=8, loc="upper left")
    fig.text(0.99, 0.01, "x: not run / stopped (see legend)", ha="right", fontsize=8, color="gray")
    fig.tight_layout()
    return save_png(fig, out / f"{axis}_{model}.png")


def speedups(records: list[dict], model: str) -> tuple[dict[str, Series], dict[Series, dict[int, Any]]]:
    """The numbers of the speedup chart: per machine, the torch_loop series its rows are measured
    against (the main environment's where it has several), and per other series {trip count:
    that machine's torch_loop median / the series' median (fwd+bwd)} for ok rows, or the row's
    status for rows that are not ok. A series on a machine without an ok torch_loop row is left out."""
    by_series = axis_records(records, model, "length")
    length = lambda r: r["sizes"][_key(r["sizes"], LENGTH_KEYS)]
    timed = lambda r: r["status"] == "ok" and r.get("fwd_bwd")
    baselines: dict[str, Series] = {}
    candidates = [s for s, rows in by_series.items() if s.driver == CHART_BASELINE and any(timed(r) for r in rows)]
    for s in sorted(candidates, key=lambda s: (by_series[s][0].get("environment_name", "main") != "main", s)):
        baselines.setdefault(s.machine, s)
    base_ms = {
        m: {length(r): r["fwd_bwd"]["median_ms"] for r in by_series[s] if timed(r)} for m, s in baselines.items()
    }
    out: dict[Series, dict[int, Any]] = {}
    for s, rows in sorted(by_series.items()):
        if s.machine not in base_ms or baselines[s.machine] == s:
            continue
        base = base_ms[s.machine]
        got: dict[int, Any] = {}
        for r in rows:
            if timed(r) and length(r) in base:
                got[length(r)] = speedup(r["fwd_bwd"]["median_ms"], base[length(r)])
            elif r["status"] != "ok":
                got[length(r)] = r["status"]
        out[s] = got
    return baselines, out


def speedup_chart(records: list[dict], model: str, out: Path) -> Path | None:
    """Bars: torch_loop median / series median (fwd+bwd) at each trip count, each series over the
    torch_loop of its own machine; line at 1."""
    baselines, ratios = speedups(records, model)
    if not baselines:
        return None
    by_series = axis_records(records, model, "length")
    key = _key(by_series[next(iter(baselines.values()))][0]["sizes"], LENGTH_KEYS)
    lengths = sorted(
        {r["sizes"][key] for s in baselines.values() for r in by_series[s] if r["status"] == "ok" and r.get("fwd_bwd")}
    )
    series = list(ratios)
    width = 0.8 / max(len(series), 1)
    from matplotlib.patches import Patch

    fig, ax = pyplot().subplots(figsize=(12, 4.8))
    handles = []
    look = chart_styles({s: by_series[s] for s in series})
    for i, s in enumerate(series):
        heights, xs = [], []
        color = look[s].color
        for j, L in enumerate(lengths):
            v = ratios[s].get(L)
            x = j + (i - (len(series) - 1) / 2) * width
            if isinstance(v, float):
                heights.append(v)
                xs.append(x)
            elif v is not None:
                ax.text(x, 1.05, v, rotation=90, ha="center", va="bottom", fontsize=7, color=color)
        hatch = VENDOR_HATCH if by_series[s][0].get("anchor") else look[s].hatch or None
        ax.bar(xs, heights, width, color=color, edgecolor="black", lw=0.3, hatch=hatch, hatchcolor=ink_on(color))
        for x, h in zip(xs, heights):  # a log axis understates ratios: the number is printed on the bar
            ax.text(x, h, speedup_label(h), rotation=90, ha="center", va="bottom", fontsize=6.5)
        handles.append(Patch(facecolor=color, edgecolor="black", hatch=hatch, hatchcolor=ink_on(color), label=s.label))
    ax.axhline(1.0, color="black", lw=1)
    ax.set_yscale("log")
    readable_log_y(ax)
    ax.set_xticks(range(len(lengths)), [f"{key}={L}" for L in lengths])
    ax.set_ylabel(f"speedup over {CHART_BASELINE} (fwd+bwd median)")
    against = ", ".join(sorted({b.env for b in baselines.values()}))
    same = " of the same machine" if any(b.machine for b in baselines.values()) else ""
    ax.set_title(
        f"{model}: speedup over the torch Python loop ({CHART_BASELINE}, {against}){same}\n"
        "(hatched: vendor anchors; log axis, the ratio printed on each bar; >1 is faster)",
        fontsize=10,
    )
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(handles=handles, fontsize=8, ncol=3 if any(s.machine for s in series) else 4, loc="upper left")
    fig.tight_layout()
    return save_png(fig, out / f"speedup_{model}.png")


def roofline_chart(records: list[dict], out: Path) -> Path | None:
    """Per model: % of the measured GEMM peak reached by fwd+bwd, vs trip count."""
    models = sorted({r["model"] for r in records if r.get("roofline") and r.get("sweep", {}).get("axis") == "length"})
    if not models:
        return None
    fig, axes = pyplot().subplots(1, len(models), figsize=(6.5 * len(models), 4.8), squeeze=False, layout="constrained")
    look = chart_styles({s: rows for m in models for s, rows in axis_records(records, m, "length").items()})
    by_machine = several_machines(records)
    peaks = sorted(
        {
            (machine_of(r) if by_machine else "", round(r["gemm_peak"]["gflops"]), r["gemm_peak"]["threads"])
            for r in records
            if r.get("gemm_peak")
        }
    )
    for ax, model in zip(axes[0], models):
        for series, rows in sorted(axis_records(records, model, "length").items()):
            ok = [r for r in rows if r.get("roofline", {}).get("fwd_bwd")]
            if not ok:
                continue
            key = _key(ok[0]["sizes"], LENGTH_KEYS)
            ax.plot(
                [r["sizes"][key] for r in ok],
                [100 * r["roofline"]["fwd_bwd"]["fraction_of_peak"] for r in ok],
                marker=look[series].marker,
                ms=4,
                color=look[series].color,
                ls="--" if ok[0].get("anchor") else "-",
                label=series.label,
            )
            ax.set_xlabel(key)
        ax.set(xscale="log", yscale="log", ylabel="% of GEMM peak (fwd+bwd)", title=f"{model}: achieved / peak")
        readable_log_y(ax)
        xs = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
        ax.minorticks_off()
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    measured = " and ".join(
        f"{m + ': ' if m else ''}{g} GFLOP/s ({t} thread{'s' if t > 1 else ''})" for m, g, t in peaks
    )
    fig.suptitle(
        wrap(
            f"roofline fraction: analytic FLOPs / median time / float32 GEMM peak measured in the same run"
            f"{' on the same machine' if by_machine else ''}\n({measured})",
            6.5 * len(models),
        ),
        fontsize=10,
    )
    return save_png(fig, out / "roofline.png")


def all_charts(records: list[dict], out: Path) -> list[Path]:
    """Every chart the records hold, in reading order: per model its bar chart (rows of `run`) and
    T-growth chart, then per swept model its time, speedup and hidden-size charts, then remat's
    price (where remat mechanisms ran beside their plain drivers), the roofline, every row against
    every ceiling and the gradient-error heatmap, each of the reverse-mode rows (a row of another mode is the
    same driver by another road, drawn where roads are compared: the mode-speed chart), then the mode-speed
    chart."""
    every, records = records, [r for r in records if r.get("mode", VJP) == VJP]
    paths: list[Path | None] = []
    for model in sorted({r["model"] for r in records}):
        paths += [bar_chart(records, model, out), t_growth_chart(records, model, out)]
    for model in sorted({r["model"] for r in records if "sweep" in r}):
        paths.append(time_chart(records, model, "length", out))
        paths.append(speedup_chart(records, model, out))
        paths.append(time_chart(records, model, "hidden", out))
    paths.append(remat_price_chart(records, out))
    paths.append(roofline_chart(records, out))
    paths.append(ceilings_chart(records, out))
    paths.append(grad_error_heatmap(records, out))
    paths.append(mode_speed_chart(every, out))
    return [p for p in paths if p is not None]
