"""The roofline against every ceiling: each timed row's forward+backward as achieved GFLOP/s against
its arithmetic intensity (analytic FLOPs / the bytes it must move, rnnbench.rows.counts), under the
machine's ceilings as the records hold them (rnnbench.machine.binding): the GEMM peak of each dtype
(a flat line), the bandwidth of each memory level (a slope: GB/s x FLOP/byte), and each row's own
dispatch ceiling (its FLOPs / its dispatch bound: a tick above the row, joined to it). A row's marker
is its dtype's (bfloat16 rows included), its colour the ceiling that binds it. One panel per machine
and device."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from rnnbench.report.charts.style import latest_rows, pyplot, save_png, wrap
from rnnbench.report.labels import machine_of

DTYPE_MARKERS = {"float32": "o", "bfloat16": "s", "float64": "^"}
BINDING_COLOURS = {"gemm": "#1b9e77", "bandwidth": "#d95f02", "dispatch": "#7570b3"}
LEVEL_STYLES = {"L1": ":", "L2": "-.", "L3": "--", "DRAM": "-", "HBM": "-"}


class Point(NamedTuple):
    """One row as the chart draws it."""

    label: str  # model/driver (env)
    dtype: str
    intensity: float  # FLOP / byte
    gflops: float  # achieved
    dispatch_gflops: float | None  # its FLOPs at its dispatch bound: the dispatch ceiling over it
    binding: str  # the ceiling kind that binds it


def points(records: list[dict[str, Any]]) -> dict[str, list[Point]]:
    """{panel (machine, device): its rows' points}: every ok row timed with FLOPs, bytes and a binding."""
    out: dict[str, list[Point]] = defaultdict(list)
    for r in latest_rows(records):
        bound = (r.get("binding") or {}).get("fwd_bwd") or {}
        flops = (r.get("flops") or {}).get("fwd_bwd")
        moved = ((r.get("counts") or {}).get("bytes") or {}).get("fwd_bwd")
        if r.get("status") != "ok" or not (bound and flops and moved and (r.get("fwd_bwd") or {}).get("median_ms")):
            continue
        seconds = r["fwd_bwd"]["median_ms"] / 1e3
        dispatch_ms = (bound.get("bounds_ms") or {}).get("dispatch")
        out[f"{machine_of(r)} {r.get('device', 'cpu')}"].append(
            Point(
                label=f"{r['model']}/{r['driver']} ({r.get('environment_name', 'main')})",
                dtype=r["dtype"],
                intensity=flops / moved,
                gflops=flops / seconds / 1e9,
                dispatch_gflops=flops / (dispatch_ms / 1e3) / 1e9 if dispatch_ms else None,
                binding=bound["ceiling"],
            )
        )
    return dict(out)


def panel_ceilings(records: list[dict[str, Any]], panel: str) -> tuple[dict[str, float], dict[str, float]]:
    """({dtype: GEMM peak GFLOP/s}, {level: GB/s}) the panel's rows were held against."""
    peaks: dict[str, float] = {}
    levels: dict[str, float] = {}
    for r in records:
        if f"{machine_of(r)} {r.get('device', 'cpu')}" != panel:
            continue
        if (r.get("gemm_peak") or {}).get("gflops"):
            peaks[r["dtype"]] = max(peaks.get(r["dtype"], 0.0), r["gemm_peak"]["gflops"])
        for level, gbs in ((r.get("ceilings") or {}).get("bandwidth_gbs") or {}).items():
            levels[level] = max(levels.get(level, 0.0), gbs)
    return peaks, levels


def _plain_log_ticks(ax) -> None:
    """Decade ticks on both log axes written as plain numbers (the charts draw no mathtext)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10))
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def ceilings_chart(records: list[dict[str, Any]], out: Path) -> Path | None:
    """ceilings.png (module docstring); None where no row has a binding ceiling."""
    panels = points(records)
    if not panels:
        return None
    fig, axes = pyplot().subplots(1, len(panels), figsize=(8 * len(panels), 6), squeeze=False, layout="constrained")
    for ax, (panel, rows) in zip(axes[0], sorted(panels.items())):
        peaks, levels = panel_ceilings(records, panel)
        xs = [p.intensity for p in rows]
        lo, hi = min(xs) / 4, max(xs) * 4
        for dtype, gflops in sorted(peaks.items()):
            ax.axhline(gflops, color="black", lw=1, ls="-" if dtype == "float32" else "--")
            ax.text(hi, gflops, f" GEMM peak {dtype} {gflops:.3g}", va="bottom", ha="right", fontsize=7)
        for level, gbs in levels.items():
            ax.plot([lo, hi], [gbs * lo, gbs * hi], color="grey", lw=0.8, ls=LEVEL_STYLES.get(level, "-"))
            at = lo * 2  # inside the axes: a label at its left edge is cut
            ax.text(at, gbs * at, f"{level} {gbs:.3g} GB/s", fontsize=7, color="dimgrey", va="bottom")
        for p in rows:
            colour = BINDING_COLOURS.get(p.binding, "black")
            ax.scatter([p.intensity], [p.gflops], marker=DTYPE_MARKERS.get(p.dtype, "x"), color=colour, s=28, zorder=3)
            if p.dispatch_gflops:
                ax.plot([p.intensity] * 2, [p.gflops, p.dispatch_gflops], color=BINDING_COLOURS["dispatch"], lw=0.5)
                ax.scatter([p.intensity], [p.dispatch_gflops], marker="_", color=BINDING_COLOURS["dispatch"], s=40)
            ax.annotate(p.label, (p.intensity, p.gflops), fontsize=4.5, xytext=(3, -3), textcoords="offset points")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), xlabel="FLOP / byte moved (fwd+bwd)")
        _plain_log_ticks(ax)
        ax.set_ylabel("achieved GFLOP/s (fwd+bwd median)")
        ax.set_title(panel, fontsize=9)
        ax.grid(True, which="both", alpha=0.2)
        handles = [
            ax.scatter([], [], marker=m, color="black", label=d)
            for d, m in DTYPE_MARKERS.items()
            if any(p.dtype == d for p in rows)
        ]
        handles += [ax.scatter([], [], marker="o", color=c, label=f"bound by {k}") for k, c in BINDING_COLOURS.items()]
        ax.legend(handles=handles, fontsize=7, loc="lower right")
    fig.suptitle(
        wrap(
            "every timed row against every ceiling: GEMM peaks (flat), memory bandwidth per level (slopes), "
            "each row's dispatch ceiling (the tick above it); colour: the ceiling that binds it",
            8 * len(panels),
        ),
        fontsize=10,
    )
    return save_png(fig, out / "ceilings.png")


def main(argv: list[str]) -> int:
    """`python -m rnnbench.report.charts.ceilings OUT_DIR RECORDS.jsonl...`: OUT_DIR/ceilings.png."""
    import sys

    from rnnbench import results_file  # lazy: the chart's own command reads records; the report passes them

    if len(argv) < 2:
        print("usage: python -m rnnbench.report.charts.ceilings OUT_DIR RECORDS.jsonl...", file=sys.stderr)
        return 2
    path = ceilings_chart(results_file.load([Path(a) for a in argv[1:]]), Path(argv[0]))
    if path is None:
        print("rnnbench: no timed row with a binding ceiling in these records", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
