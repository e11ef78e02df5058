#!/usr/bin/env python
"""The table of docs/results/2026-12-07-remat-price.md from the records beside this script: each remat
mechanism against its plain driver (rnnbench.report.remat_price.remat_prices, the chart's numbers)
with both rows' step memory, fwd+bwd CPU medians and % of the GEMM peak, and the load.

    python docs/results/2026-12-07-remat-price/prices.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent.parent / "src"))

from rnnbench import results_file  # noqa: E402
from rnnbench.report.remat_price import remat_prices  # noqa: E402
from rnnbench.report.style import latest_rows  # noqa: E402

records = latest_rows(results_file.load(sorted(HERE.glob("*.jsonl"))))
row = {(r["model"], r["driver"], r["sizes"]["T"]): r for r in records}


def ms(r: dict) -> str:
    fb = r.get("fwd_bwd") or {}
    return f"{fb['cpu_median_ms']:.4g}" if fb.get("cpu_median_ms") else "-"


def peak(r: dict) -> str:
    fb = (r.get("roofline") or {}).get("fwd_bwd")
    return f"{100 * fb['fraction_of_peak']:.2g}" if fb else "-"


def mib(r: dict) -> str:
    saved = (r.get("step_memory") or {}).get("saved_mb")
    return "-" if saved is None else f"{saved:.4g}"


def load(r: dict) -> str:
    cpu = r.get("cpu") or {}
    return f"{cpu['load_start'][0]:.1f}" if cpu.get("load_start") else "-"


print(
    "| model | T | mechanism | plain | speed-up | memory kept | remat: ms / MiB / % peak | "
    "plain: ms / MiB / % peak | load | why none |"
)
print("|---|---|---|---|---|---|---|---|---|---|")
for (model, *_), prices in remat_prices(records).items():
    for p in sorted(prices, key=lambda p: (p.T, p.mechanism)):
        r, q = row[(model, p.mechanism, p.T)], row.get((model, p.plain, p.T), {})
        speed = "-" if p.speedup is None else f"{p.speedup:.2f}x" + ("*" if p.contended else "")
        kept = "-" if p.memory is None else f"{p.memory:.2f}"
        mine = f"{ms(r)} / {mib(r)} / {peak(r)}"
        theirs = f"{ms(q)} / {mib(q)} / {peak(q)}" if q else "-"
        print(
            f"| {model} | {p.T} | `{p.mechanism}` | `{p.plain}` | {speed} | {kept} | {mine} | {theirs} | "
            f"{load(r)} / {load(q) if q else '-'} | {p.why.split(';')[0] if p.why else ''} |"
        )

# The chooser's table: per model and mechanism, "speed-up / memory kept" at each T.
print()
for (model, *_), prices in remat_prices(records).items():
    ts = sorted({p.T for p in prices})
    print(f"| {model}: speed-up / memory kept | " + " | ".join(f"T={t}" for t in ts) + " |")
    print("|---|" + "---|" * len(ts))
    by_mechanism: dict[str, dict[int, str]] = {}
    for p in prices:
        cell = "-" if p.speedup is None else f"{p.speedup:.2f}x"
        cell += " / " + ("-" if p.memory is None else f"{p.memory:.2f}")
        by_mechanism.setdefault(p.mechanism, {})[p.T] = cell
    for mechanism, cells in by_mechanism.items():
        print(f"| `{mechanism}` | " + " | ".join(cells.get(t, "not run") for t in ts) + " |")
    print()
