"""Charts (PNG, matplotlib Agg) from result records only: nothing here imports models or drivers.

Per model: fwd+bwd time vs trip count (log-log, one line per driver, IQR band) beside the first
call (compile) time; speedup over the Python loop (torch_loop) as bars with a line at 1; time vs
hidden size when swept. Across models: a gradient-error heatmap (driver x model, log colour scale,
non-ok cells labelled with their status) and the fraction of the GEMM peak reached (roofline).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

BASELINE = "torch_loop"
LENGTH_KEYS, HIDDEN_KEYS = ("T", "K"), ("H", "n")
DPI = 100


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    """PNG with a 256-colour palette: charts have few colours, and the files stay small enough to commit."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, dpi=DPI, format="png")
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(256).save(path, optimize=True)


def _key(sizes: dict, keys: tuple[str, ...]) -> Optional[str]:
    return next((k for k in keys if k in sizes), None)


def driver_colors(records: Iterable[dict]) -> dict[str, Any]:
    """One fixed colour per driver name, the same in every chart."""
    plt = _plt()
    names = sorted({r["driver"] for r in records})
    palette = list(plt.get_cmap("tab10").colors) + ["#000000", "#b5b500", "#00b5b5", "#b500b5"]
    return {n: palette[i % len(palette)] for i, n in enumerate(names)}


def axis_records(records: list[dict], model: str, axis: str) -> dict[str, list[dict]]:
    """Sweep records of `model` on `axis` ("length" or "hidden"), by driver, in size order.
    The length axis also holds the row shared with the hidden axis (run once)."""
    keys = LENGTH_KEYS if axis == "length" else HIDDEN_KEYS
    by_driver: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r["model"] != model or "sweep" not in r or r["status"] == "unavailable":
            continue
        if r["sweep"]["axis"] != axis and not (axis == "hidden" and _shares_hidden_base(r, records)):
            continue
        by_driver[r["driver"]].append(r)
    for rows in by_driver.values():
        rows.sort(key=lambda r: r["sizes"][_key(r["sizes"], keys)])
    return dict(by_driver)


def _shares_hidden_base(rec: dict, records: list[dict]) -> bool:
    """A length-axis row at the length the hidden axis was swept at belongs on the hidden chart."""
    lk = _key(rec["sizes"], LENGTH_KEYS)
    hidden_lengths = {r["sizes"].get(lk) for r in records if r.get("sweep", {}).get("axis") == "hidden" and r["model"] == rec["model"]}
    return rec["sizes"].get(lk) in hidden_lengths


def _not_run_note(rows: list[dict], key: str) -> str:
    bad = [r for r in rows if r["status"] != "ok"]
    if not bad:
        return ""
    statuses = sorted({r["status"] for r in bad})
    return f" ({'/'.join(statuses)} at {key}={','.join(str(r['sizes'][key]) for r in bad)})"


def time_chart(records: list[dict], model: str, axis: str, out: Path, colors: dict) -> Optional[Path]:
    plt = _plt()
    by_driver = axis_records(records, model, axis)
    if not by_driver:
        return None
    keys = LENGTH_KEYS if axis == "length" else HIDDEN_KEYS
    key = _key(next(iter(by_driver.values()))[0]["sizes"], keys)
    fig, (ax_t, ax_c) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.35, 1]})
    for driver, rows in sorted(by_driver.items()):
        ok = [r for r in rows if r["status"] == "ok" and r.get("fwd_bwd")]
        label = driver + _not_run_note(rows, key)
        style = dict(color=colors[driver], marker="o", ms=4, lw=1.6, ls="--" if rows[0].get("anchor") else "-")
        if ok:
            x = [r["sizes"][key] for r in ok]
            med = [r["fwd_bwd"]["median_ms"] for r in ok]
            ax_t.plot(x, med, label=label, **style)
            ax_t.fill_between(x, [r["fwd_bwd"]["q1_ms"] for r in ok], [r["fwd_bwd"]["q3_ms"] for r in ok], color=colors[driver], alpha=0.15)
            ax_c.plot(x, [r["first_call_s"] for r in ok], **style)
        else:
            ax_t.plot([], [], label=label, **style)
        skipped = [r for r in rows if r["status"] != "ok"]
        if skipped and ok:  # mark where the line stops for a reason
            ax_t.plot([r["sizes"][key] for r in skipped], [max(med)] * len(skipped), "x", color=colors[driver], ms=8, mew=2)
    first = next(iter(by_driver.values()))[0]
    fixed = ", ".join(f"{k}={v}" for k, v in first["sizes"].items() if k != key)
    ax_t.set(xscale="log", yscale="log", xlabel=key, ylabel="fwd+bwd median ms (band: IQR)",
             title=f"{model}: fwd+bwd time vs {key} ({fixed}, {first['dtype']})")
    ax_c.set(xscale="log", yscale="log", xlabel=key, ylabel="seconds",
             title="first call: trace + compile + run (cold process)")
    for ax in (ax_t, ax_c):
        _readable_log_y(ax)
        ax.grid(True, which="both", alpha=0.3)
        xs = sorted({r["sizes"][key] for rows in by_driver.values() for r in rows})
        ax.set_xticks(xs, [str(v) for v in xs])
        ax.minorticks_off()
    ax_t.legend(fontsize=8, loc="upper left")
    fig.text(0.99, 0.01, "x: not run / stopped (see legend)", ha="right", fontsize=8, color="gray")
    fig.tight_layout()
    path = out / f"{axis}_{model}.png"
    _save(fig, path)
    plt.close(fig)
    return path


def _readable_log_y(ax) -> None:
    """Label 1-2-5 ticks on a log y axis as plain numbers (call after plotting: uses the limits)."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter, NullLocator

    lo, hi = ax.get_ylim()
    ticks = [m * 10.0**e for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1) for m in (1, 2, 5)]
    ax.yaxis.set_major_locator(FixedLocator([t for t in ticks if lo <= t <= hi]))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def speedup_chart(records: list[dict], model: str, out: Path, colors: dict) -> Optional[Path]:
    """Bars: torch_loop median / driver median (fwd+bwd) at each trip count; line at 1."""
    plt = _plt()
    by_driver = axis_records(records, model, "length")
    base = {r["sizes"][_key(r["sizes"], LENGTH_KEYS)]: r for r in by_driver.get(BASELINE, []) if r["status"] == "ok"}
    if not base:
        return None
    key = _key(next(iter(base.values()))["sizes"], LENGTH_KEYS)
    lengths = sorted(base)
    drivers = [d for d in sorted(by_driver) if d != BASELINE]
    width = 0.8 / max(len(drivers), 1)
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(12, 4.8))
    handles = []
    for i, driver in enumerate(drivers):
        got = {r["sizes"][key]: r for r in by_driver[driver]}
        heights, xs = [], []
        for j, L in enumerate(lengths):
            r = got.get(L)
            if r is not None and r["status"] == "ok":
                heights.append(base[L]["fwd_bwd"]["median_ms"] / r["fwd_bwd"]["median_ms"])
                xs.append(j + (i - (len(drivers) - 1) / 2) * width)
            elif r is not None:
                ax.text(j + (i - (len(drivers) - 1) / 2) * width, 1.05, r["status"], rotation=90, ha="center", va="bottom", fontsize=7, color=colors[driver])
        hatch = "//" if by_driver[driver][0].get("anchor") else None
        ax.bar(xs, heights, width, color=colors[driver], edgecolor="black", lw=0.3, hatch=hatch)
        handles.append(Patch(facecolor=colors[driver], edgecolor="black", hatch=hatch, label=driver))
    ax.axhline(1.0, color="black", lw=1)
    ax.set_yscale("log")
    _readable_log_y(ax)
    ax.set_xticks(range(len(lengths)), [f"{key}={L}" for L in lengths])
    ax.set_ylabel(f"speedup over {BASELINE} (fwd+bwd median)")
    ax.set_title(f"{model}: speedup over the torch Python loop (hatched: vendor anchors; >1 is faster)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(handles=handles, fontsize=8, ncol=4, loc="upper left")
    fig.tight_layout()
    path = out / f"speedup_{model}.png"
    _save(fig, path)
    plt.close(fig)
    return path


def grad_error_heatmap(records: list[dict], out: Path) -> Optional[Path]:
    """Worst max relative gradient error per (driver, model) over all records of the most common
    dtype; a cell whose worst row is not ok shows that status instead."""
    from matplotlib.colors import LogNorm

    plt = _plt()
    dtypes = defaultdict(int)
    for r in records:
        dtypes[r["dtype"]] += 1
    if not dtypes:
        return None
    dtype = max(dtypes, key=dtypes.get)
    rows = [r for r in records if r["dtype"] == dtype]
    models = sorted({r["model"] for r in rows})
    drivers = sorted({r["driver"] for r in rows})
    err = np.full((len(drivers), len(models)), np.nan)
    label: dict[tuple[int, int], str] = {}
    cells: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for r in rows:
        cells[(drivers.index(r["driver"]), models.index(r["model"]))].append(r)
    tols = set()
    for (i, j), recs in cells.items():
        failed = [r for r in recs if r["status"] not in ("ok", "skipped", "unavailable")]
        ok = [r for r in recs if r["status"] == "ok" and r.get("max_rel_error") is not None]
        if failed:  # one failing row makes the cell fail, whatever the others say
            label[(i, j)] = failed[0]["status"]
            errs = [r["max_rel_error"] for r in failed if r.get("max_rel_error") is not None]
            err[i, j] = max(errs) if errs else np.nan
        elif ok:
            label[(i, j)] = "ok"
            err[i, j] = max(max(r["max_rel_error"] for r in ok), 1e-17)
            tols.update(r["tolerance"] for r in ok if r.get("tolerance"))
        else:
            label[(i, j)] = "n/a" if all(r["status"] == "unavailable" for r in recs) else "skipped"
    fig, ax = plt.subplots(figsize=(1.2 * len(models) + 3, 0.5 * len(drivers) + 2))
    masked = np.ma.masked_invalid(err)
    im = ax.imshow(masked, norm=LogNorm(vmin=1e-9, vmax=1.0), cmap="viridis", aspect="auto")
    ax.set_facecolor("#dddddd")
    for (i, j), text in label.items():
        if text == "ok":
            text = f"{err[i, j]:.0e}"
        color = "white" if label[(i, j)] == "ok" and err[i, j] < 1e-4 else "black"
        if label[(i, j)] not in ("ok", "n/a", "skipped"):
            color = "red"
        ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color, fontweight="bold" if color == "red" else None)
    ax.set_xticks(range(len(models)), models, rotation=35, ha="right")
    ax.set_yticks(range(len(drivers)), drivers)
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label("worst max relative gradient error vs the float64 oracle")
    tols = sorted(tols)
    for t in tols:
        cbar.ax.axhline(t, color="red", lw=2)
    ax.set_title(f"gradient error, {dtype}, worst over all rows\n(red line on the scale: tolerance"
                 f" {', '.join(f'{t:g}' for t in tols)}; n/a: driver does not apply)", fontsize=10)
    fig.tight_layout()
    path = out / "grad_error_heatmap.png"
    _save(fig, path)
    plt.close(fig)
    return path


def roofline_chart(records: list[dict], out: Path, colors: dict) -> Optional[Path]:
    """Per model: % of the measured GEMM peak reached by fwd+bwd, vs trip count."""
    plt = _plt()
    models = sorted({r["model"] for r in records if r.get("roofline") and r.get("sweep", {}).get("axis") == "length"})
    if not models:
        return None
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.8), squeeze=False)
    peaks = sorted({(round(r["gemm_peak"]["gflops"]), r["gemm_peak"]["threads"]) for r in records if r.get("gemm_peak")})
    for ax, model in zip(axes[0], models):
        for driver, rows in sorted(axis_records(records, model, "length").items()):
            ok = [r for r in rows if r.get("roofline", {}).get("fwd_bwd")]
            if not ok:
                continue
            key = _key(ok[0]["sizes"], LENGTH_KEYS)
            ax.plot([r["sizes"][key] for r in ok], [100 * r["roofline"]["fwd_bwd"]["fraction_of_peak"] for r in ok],
                    marker="o", ms=4, color=colors[driver], ls="--" if ok[0].get("anchor") else "-", label=driver)
            ax.set_xlabel(key)
        ax.set(xscale="log", yscale="log", ylabel="% of GEMM peak (fwd+bwd)", title=f"{model}: achieved / peak")
        _readable_log_y(ax)
        xs = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
        ax.minorticks_off()
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    measured = " and ".join(f"{g} GFLOP/s ({t} thread{'s' if t > 1 else ''})" for g, t in peaks)
    fig.suptitle(f"roofline fraction: analytic FLOPs / median time / float32 GEMM peak measured in the same run "
                 f"({measured})", fontsize=10)
    fig.tight_layout()
    path = out / "roofline.png"
    _save(fig, path)
    plt.close(fig)
    return path


def latest_rows(records: list[dict]) -> list[dict]:
    """One record per row: when a row was run again (same model, driver, dtype, device, sizes,
    environment, sweep or not), the latest record by timestamp is kept, in first-seen order."""
    def key(r: dict) -> tuple:
        return (r["model"], r["driver"], r.get("dtype"), r.get("device"), tuple(sorted(r.get("sizes", {}).items())),
                r.get("environment_name"), "sweep" in r)

    latest: dict[tuple, dict] = {}
    for r in records:
        k = key(r)
        if k not in latest or r.get("timestamp", "") >= latest[k].get("timestamp", ""):
            latest[k] = r
    return list(latest.values())


def all_charts(records: list[dict], out: Path) -> list[Path]:
    colors = driver_colors(records)
    paths: list[Optional[Path]] = []
    models = sorted({r["model"] for r in records if "sweep" in r})
    for model in models:
        paths.append(time_chart(records, model, "length", out, colors))
        paths.append(speedup_chart(records, model, out, colors))
        paths.append(time_chart(records, model, "hidden", out, colors))
    paths.append(roofline_chart(records, out, colors))
    paths.append(grad_error_heatmap(records, out))
    return [p for p in paths if p is not None]
