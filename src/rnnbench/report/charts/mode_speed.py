"""Speed by road, from records: which way to compute a derivative is fastest on each driver
(rnnbench.modes.ROADS; `rnnbench run --modes ... --roads` times each row's roads interleaved in one
loop, rnnbench.rows.roads).

Two questions, one panel each, per (model, sizes, dtype, device, loss form):
- forward vs reverse mode: one JVP along a seeded tangent (torch.func.jvp / jax.jvp; torch's dual
  tensors, torch.autograd.forward_ad) against one backward giving the whole gradient, from a vjp row's
  roads (or a jvp row's own time and its vjp road);
- per-example gradients: vmap of grad, a loop over the examples and the batched-loss trick, from a
  per_example row's own time and its roads.

Every bar is a speed-up over the same row's vjp road (ratios.speedup: vjp time / the road's time; above
1 faster than one backward of the batch), each pair of times taken in one interleaved loop, on the clock
that decides the row (timing.clock: CPU time for one-thread rows). A road without a time says why (not
offered by the driver, its values differed from the checked ones, the row not ok). Each bar is labelled
with its ratio, its median and its % of the GEMM peak where the record has one (machine.roofline).
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rnnbench.modes import JVP, JVP_DUAL, PER_EXAMPLE, PER_EXAMPLE_BATCHED_LOSS, PER_EXAMPLE_LOOP, VJP
from rnnbench.report.charts.style import DPI, latest_rows, pyplot, save_png, series_namer, wrap
from rnnbench.report.ratios import speedup, speedup_label

Panel = tuple[str, str, str, str, str]  # model, sizes, dtype, device, loss form
# the two questions: their roads in drawing order, read from rows of these modes
FORWARD, PER_EXAMPLE_Q = "forward vs reverse mode", "per-example gradients"
QUESTIONS = {
    FORWARD: ((JVP, JVP_DUAL), (VJP, JVP)),
    PER_EXAMPLE_Q: ((PER_EXAMPLE, PER_EXAMPLE_LOOP, PER_EXAMPLE_BATCHED_LOSS), (PER_EXAMPLE,)),
}
ROAD_LABELS = {
    JVP: "one JVP (torch.func.jvp / jax.jvp)",
    JVP_DUAL: "one JVP (torch forward_ad dual tensors)",
    PER_EXAMPLE: "vmap of grad",
    PER_EXAMPLE_LOOP: "a loop over examples",
    PER_EXAMPLE_BATCHED_LOSS: "batched-loss trick",
}
ROAD_COLORS = {
    JVP: "#1f77b4",
    JVP_DUAL: "#17becf",
    PER_EXAMPLE: "#2ca02c",
    PER_EXAMPLE_LOOP: "#d62728",
    PER_EXAMPLE_BATCHED_LOSS: "#9467bd",
}


@dataclass(frozen=True)
class RoadSpeed:
    """One road of one driver against that row's vjp road. speedup: vjp time / the road's time on
    `clock` (None with `why` where either has no time); ms: the road's median; peak: its fraction of the
    GEMM peak where the record counts its FLOPs; marked: the row's timing was contended or unstable."""

    series: str
    road: str
    speedup: float | None
    ms: float | None
    vjp_ms: float | None
    peak: float | None
    clock: str
    why: str
    marked: bool


def _panel(rec: dict) -> Panel:
    sizes = ",".join(f"{k}={v}" for k, v in (rec.get("sizes") or {}).items())
    return (rec["model"], sizes, rec["dtype"], rec.get("device", "cpu"), rec.get("loss_form", "model"))


def _median(timing: dict | None, clock: str) -> float | None:
    if not isinstance(timing, dict):
        return None
    value = timing.get("cpu_median_ms") if clock == "cpu" else timing.get("median_ms")
    return float(value) if value else None


def _times(rec: dict) -> tuple[dict[str, dict], dict[str, str], str]:
    """({road: its record (fwd_bwd, roofline)} of every timed road of `rec`, its own included; {road: why}
    for the others; the clock that decides the row)."""
    clock = "cpu" if (rec.get("timing") or {}).get("clock") == "cpu" else "wall"
    own = rec.get("road") or rec.get("mode", VJP)
    timed: dict[str, dict] = {}
    why: dict[str, str] = {}
    if rec.get("fwd_bwd"):
        timed[own] = {"fwd_bwd": rec["fwd_bwd"], "roofline": (rec.get("roofline") or {}).get("fwd_bwd")}
    for name, road in (rec.get("roads") or {}).items():
        if road.get("fwd_bwd"):
            timed[name] = road
        elif name not in timed:
            why[name] = str(road.get("reason") or road.get("status") or "not timed")
    return timed, why, clock


def road_speeds(records: list[dict]) -> dict[Panel, dict[str, list[RoadSpeed]]]:
    """Every road's speed-up over its row's vjp road, by panel and question (QUESTIONS), in driver order.
    A row that was not ok gives each of its question's roads a gap saying its status; rows whose mode
    answers neither question are left out."""
    rows = [r for r in latest_rows(records) if r.get("status") != "unavailable"]
    name = series_namer(rows)
    out: dict[Panel, dict[str, list[RoadSpeed]]] = defaultdict(lambda: defaultdict(list))
    answered: set[tuple] = set()
    # vjp rows first: a series answered from its vjp row is not answered again from its jvp row (the same
    # two roads, timed again)
    for r in sorted(rows, key=lambda r: r.get("mode", VJP) == JVP):
        mode = r.get("mode", VJP)
        for question, (roads, modes) in QUESTIONS.items():
            if mode not in modes or (mode == VJP and not r.get("roads")):
                continue  # a vjp row timed without its roads answers no question here
            seen = (_panel(r), question, name(r))
            if seen in answered:
                continue
            answered.add(seen)
            timed, why, clock = _times(r)
            vjp = _median((timed.get(VJP) or {}).get("fwd_bwd"), clock)
            for road in roads:
                ms = _median((timed.get(road) or {}).get("fwd_bwd"), clock)
                reason = ""
                if r["status"] != "ok":
                    reason = f"row {r['status']}"
                elif ms is None:
                    reason = why.get(road, "not timed")
                elif vjp is None:
                    reason = f"vjp: {why.get(VJP, 'not timed')}"
                peak = ((timed.get(road) or {}).get("roofline") or {}).get("fraction_of_peak")
                timing = r.get("timing") or {}
                out[_panel(r)][question].append(
                    RoadSpeed(
                        series=name(r).label,
                        road=road,
                        speedup=speedup(ms, vjp) if not reason and ms and vjp else None,
                        ms=ms,
                        vjp_ms=vjp,
                        peak=float(peak) if peak is not None else None,
                        clock=clock,
                        why=reason,
                        marked=bool(timing.get("contended") or timing.get("unstable")),
                    )
                )
    return {k: dict(v) for k, v in sorted(out.items())}


def _bar_label(s: RoadSpeed) -> str:
    text = f"{speedup_label(s.speedup)}  {s.ms:.4g} ms" if s.speedup is not None and s.ms else ""
    if s.peak is not None and text:
        text += f", {100 * s.peak:.2g}% peak"
    return text


def _draw(ax, speeds: list[RoadSpeed], roads: tuple[str, ...]) -> None:
    """Horizontal bars: one group per series (driver and env), one bar per road, x = speed-up over the
    series' vjp (log); a gap is a red note in the bar's place."""
    series = list(dict.fromkeys(s.series for s in speeds))
    height = 0.8 / len(roads)
    by = {(s.series, s.road): s for s in speeds}
    gaps: list[tuple[float, str]] = []
    for i, name in enumerate(series):
        for j, road in enumerate(roads):
            s = by.get((name, road))
            if s is None:
                continue
            y = i + (j - (len(roads) - 1) / 2) * height
            if s.speedup is None:
                gaps.append((y, f"{ROAD_LABELS[road]}: {s.why}"))
                continue
            hatch = "/" if s.marked else ""
            ax.barh(y, s.speedup, height=height * 0.92, left=0, color=ROAD_COLORS[road], hatch=hatch,
                    label=ROAD_LABELS[road])  # fmt: skip
            ax.text(s.speedup, y, "  " + _bar_label(s), fontsize=6.5, va="center")
    ax.set_yticks(range(len(series)), series, fontsize=7.5)
    ax.set_ylim(len(series) - 0.35, -0.65)  # top to bottom in series order, room for a last gap's note
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=1)
    values = [s.speedup for s in speeds if s.speedup]
    lo, hi = (min(min(values), 1.0) / 2, max(max(values), 1.0) * 6) if values else (0.01, 100.0)
    ax.set_xlim(lo, hi)
    readable_log_x(ax)
    for y, text in gaps:  # a road without a time: why, in red, in its bar's place
        ax.text(lo * 1.05, y, textwrap.shorten(text, 95), color="#b00000", fontsize=6.5, va="center")
    ax.grid(True, axis="x", which="major", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=7, loc="lower right")


def readable_log_x(ax) -> None:
    """Label 1-2-5 ticks on a log x axis as plain numbers (after the limits are set)."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter, NullLocator

    lo, hi = ax.get_xlim()
    ticks = [m * 10.0**e for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1) for m in (1, 2, 5)]
    ax.xaxis.set_major_locator(FixedLocator([t for t in ticks if lo <= t <= hi]))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def mode_speed_chart(records: list[dict], out: Path) -> Path | None:
    """mode_speed.png: per panel the forward-vs-reverse bars beside the per-example bars (module
    docstring); None when no record holds a road beside its own."""
    panels = road_speeds(records)
    if not panels:
        return None
    fig = pyplot().figure(figsize=(18, 1.5 + 0.45 * _height(panels)), layout="constrained", dpi=DPI)
    rows = fig.subfigures(len(panels), 1, squeeze=False)[:, 0]
    for row, ((model, sizes, dtype, device, loss), questions) in zip(rows, panels.items()):
        axes = row.subplots(1, len(QUESTIONS), squeeze=False)[0]
        where = f"{model}  {sizes}  {dtype}  {device}" + ("" if loss == "model" else f"  loss {loss}")
        for ax, (question, (roads, _)) in zip(axes, QUESTIONS.items()):
            speeds = questions.get(question, [])
            if speeds:
                _draw(ax, speeds, roads)
            else:
                ax.set_axis_off()
                ax.text(0.5, 0.5, f"no {question} rows", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"{where}: {question}", fontsize=9)
            ax.set_xlabel("speed-up over the same driver's vjp (one backward of the batch): above 1 faster")
    clocks = sorted({s.clock for qs in panels.values() for ss in qs.values() for s in ss if s.speedup is not None})
    fig.suptitle(
        wrap(
            "speed by road: each bar against the same row's reverse-mode gradient, both timed in one "
            f"interleaved loop (medians on the {'/'.join(clocks) or 'rows'} clock; hatched: the row's "
            "timing was contended or unstable)",
            16,
        ),
        fontsize=10,
    )
    return save_png(fig, out / "mode_speed.png")


def _height(panels: dict[Panel, dict[str, list[RoadSpeed]]]) -> int:
    """Rows of bars the figure needs: per panel, the taller question's bars."""
    return sum(max(len(ss) for ss in qs.values()) + 2 for qs in panels.values())
