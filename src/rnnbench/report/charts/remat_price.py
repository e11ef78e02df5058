"""The price of rematerialisation, from records: each remat mechanism (suites.REMAT: a driver that
recomputes its step in the backward, and the plain driver it is a setting of) against its plain
counterpart, at each sequence length T, on the same machine, environment, model, other sizes, dtype,
device and loss form.

Two numbers a pair, each from the two rows' own records:
- speed-up of remat over plain (fwd+bwd median, ratios.speedup: plain time / remat time), each row
  on the clock that decides both (ratios.clock_of: CPU time for one-thread rows); below 1
  is remat's price in time;
- memory kept: remat's step memory (record field step_memory, what one training forward keeps for its
  backward) / plain's; below 1 is what remat saves.

A pair without a number says why (a row not ok, not timed, not counted, or absent). remat_price_chart
draws them: per panel (model, other sizes, dtype, device, loss form) the speed-up beside the memory
kept, x = T, one line per mechanism (torch's dashed), one legend a row.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from rnnbench.report.charts.style import (
    DPI,
    latest_rows,
    pyplot,
    readable_log_y,
    save_png,
    series_namer,
    styles,
    wrap,
)
from rnnbench.report.labels import saved_mb
from rnnbench.report.ratios import clock_of, speedup, speedup_label
from rnnbench.suites import REMAT

Panel = tuple[str, str, str, str, str]  # model, the sizes other than T, dtype, device, loss form


@dataclass(frozen=True)
class Price:
    """One remat mechanism against its plain counterpart at one T. speedup: plain time / remat
    time (fwd+bwd medians on `clock`); memory: remat's step memory / plain's; each None with the
    reason in `why` where a row gives no number."""

    mechanism: str
    plain: str
    env: str
    T: int
    speedup: float | None
    memory: float | None
    clock: str
    why: str
    contended: bool  # either row was timed under contention or unstable (its time is marked)


def _panel(rec: dict) -> Panel:
    rest = ",".join(f"{k}={v}" for k, v in rec["sizes"].items() if k != "T")
    return (rec["model"], rest, rec["dtype"], rec.get("device", "cpu"), rec.get("loss_form", "model"))


def _timed(rec: dict) -> bool:
    return rec["status"] == "ok" and bool(rec.get("fwd_bwd"))


def _median_ms(rec: dict, clock: str) -> float:
    fwd_bwd = rec["fwd_bwd"]
    return float(fwd_bwd["cpu_median_ms"] if clock == "cpu" else fwd_bwd["median_ms"])


def _marked(rec: dict) -> bool:
    timing = rec.get("timing") or {}
    return bool(timing.get("contended") or timing.get("unstable"))


def _price(remat: dict, plain: dict | None, *, env: str) -> Price:
    mechanism, T = remat["driver"], remat["sizes"]["T"]
    if plain is None:
        return Price(
            mechanism,
            REMAT[mechanism],
            env,
            T,
            speedup=None,
            memory=None,
            clock="",
            why="no plain row",
            contended=False,
        )
    why = [f"{name}: {r['status']}" for name, r in (("remat", remat), ("plain", plain)) if r["status"] != "ok"]
    ratio = memory = None
    clock = ""
    if _timed(remat) and _timed(plain):
        clock = clock_of([remat, plain])
        ratio = speedup(_median_ms(remat, clock), _median_ms(plain, clock))
    kept, base = saved_mb(remat), saved_mb(plain)
    if kept is not None and base:
        memory = kept / base
    if not why:  # both rows ok: a number is missing only where a row was not timed or not counted
        why += ["not timed"] * (ratio is None) + ["step memory not counted"] * (memory is None)
    marked = _marked(remat) or _marked(plain)
    return Price(
        mechanism,
        plain["driver"],
        env,
        T,
        speedup=ratio,
        memory=memory,
        clock=clock,
        why="; ".join(why),
        contended=marked,
    )


def remat_prices(records: list[dict]) -> dict[Panel, list[Price]]:
    """Every remat mechanism's price against its plain counterpart, by panel, in (mechanism, T)
    order: each remat row (the latest record of a row) paired with the plain row of its series'
    environment and machine at the same T. Records without a T, or whose driver is not a remat
    mechanism, are left out."""
    rows = [r for r in latest_rows(records) if "T" in (r.get("sizes") or {}) and r["status"] != "unavailable"]
    name = series_namer(rows)
    plain_of: dict[tuple, dict] = {}
    for r in rows:
        series = name(r)
        plain_of[(_panel(r), series.driver, series.env, series.machine, r["sizes"]["T"])] = r
    out: dict[Panel, list[Price]] = defaultdict(list)
    for r in rows:
        if r["driver"] not in REMAT:
            continue
        s = name(r)
        env = s.env + (f" @ {s.machine}" if s.machine else "")
        plain = plain_of.get((_panel(r), REMAT[r["driver"]], s.env, s.machine, r["sizes"]["T"]))
        out[_panel(r)].append(_price(r, plain, env=env))
    return {k: sorted(v, key=lambda p: (p.mechanism, p.env, p.T)) for k, v in sorted(out.items())}


def _legend_label(line: list[Price]) -> str:
    """A line's legend entry: the pair, and where it has no number, at which T and why."""
    label = f"{line[0].mechanism} vs {line[0].plain} ({line[0].env})"
    reasons: dict[str, list[str]] = defaultdict(list)
    for p in line:
        if p.speedup is None or p.memory is None:
            reasons[p.why or "no number"].append(str(p.T))
    if reasons:
        text = "; ".join(f"none at T={','.join(ts)}: {why}" for why, ts in reasons.items())
        label += "\n" + textwrap.fill(f"({text})", 90)
    return label


def _draw(ax, prices: list[Price], *, value: str, look: dict) -> None:
    """One line per (mechanism, env) of the `value` numbers ("speedup" or "memory"), torch's dashed;
    an x where a line stops for want of a number; hollow markers where a time is marked. Each number
    is printed once per point (lines that meet share a label)."""
    by_line: dict[tuple[str, str], list[Price]] = defaultdict(list)
    for p in prices:
        by_line[(p.mechanism, p.env)].append(p)
    printed: set[tuple[int, str]] = set()
    for (mechanism, env), line in sorted(by_line.items()):
        style = look[mechanism]
        have = [p for p in line if getattr(p, value) is not None]
        gaps = [p for p in line if getattr(p, value) is None]
        xs, ys = [p.T for p in have], [getattr(p, value) for p in have]
        ls = "--" if env.startswith("torch") else "-"
        ax.plot(xs, ys, color=style.color, marker=style.marker, ms=6, lw=1.6, ls=ls, label=_legend_label(line))
        hollow = [(p.T, getattr(p, value)) for p in have if value == "speedup" and p.contended]
        if hollow:  # a marked time: drawn open, so the eye weighs it less
            hx, hy = zip(*hollow)
            ax.plot(hx, hy, ls="", marker=style.marker, ms=6, mfc="white", mec=style.color)
        for x, y in zip(xs, ys):
            text = speedup_label(y)
            if (x, text) not in printed:
                printed.add((x, text))
                ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=6.5)
        if gaps and have:
            ax.plot([gaps[0].T], [ys[-1]], "x", color=style.color, ms=9, mew=2)


def remat_price_chart(records: list[dict], out: Path) -> Path | None:
    """remat_price.png: per panel the speed-up of each remat mechanism over its plain counterpart
    (left) and the step memory it keeps (right) against T; None when the records hold no remat
    mechanism beside a row of any T."""
    panels = {k: v for k, v in remat_prices(records).items() if v}
    if not panels:
        return None
    look = styles(p.mechanism for ps in panels.values() for p in ps)
    fig = pyplot().figure(figsize=(14, 6.4 * len(panels)), layout="constrained", dpi=DPI)
    rows = fig.subfigures(len(panels), 1, squeeze=False)[:, 0]
    for row, ((model, rest, dtype, device, loss), prices) in zip(rows, panels.items()):
        ax_t, ax_m = row.subplots(1, 2)
        where = f"{model}  {rest}  {dtype}  {device}" + ("" if loss == "model" else f"  loss {loss}")
        for ax, value, title, ylabel in (
            (ax_t, "speedup", "speed-up of remat over plain, fwd+bwd", "plain time / remat time (below 1: slower)"),
            (ax_m, "memory", "step memory kept by remat", "remat / plain, saved for backward (below 1: less)"),
        ):
            _draw(ax, prices, value=value, look=look)
            ax.axhline(1.0, color="black", lw=1)
            ts = sorted({p.T for p in prices})
            ax.set(xscale="log", yscale="log", xlabel="T (steps)", ylabel=ylabel)
            ax.set_xticks(ts, [str(t) for t in ts])
            ax.minorticks_off()
            readable_log_y(ax)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"{where}: {title}", fontsize=9)
        # one legend a row, below both panels: the lines are the same pairs in each
        row.legend(*ax_t.get_legend_handles_labels(), fontsize=7, loc="outside lower center", ncol=2)
    clocks = sorted({p.clock for ps in panels.values() for p in ps if p.clock})
    fig.suptitle(
        wrap(
            "remat's price: each mechanism against its plain counterpart at each T, same machine and sizes "
            f"(times on the {'/'.join(clocks) or 'rows'} clock; open marker: a time marked contended or unstable)",
            14,
        ),
        fontsize=10,
    )
    return save_png(fig, out / "remat_price.png")
