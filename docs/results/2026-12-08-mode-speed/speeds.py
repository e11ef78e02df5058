#!/usr/bin/env python
"""The tables of docs/results/2026-12-08-mode-speed.md from the records beside this script: each road's
speed-up over its row's vjp (rnnbench.report.charts.mode_speed.road_speeds, the chart's numbers), its CPU
median and % of the GEMM peak, or why it has none; and each row's load.

    python docs/results/2026-12-08-mode-speed/speeds.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent.parent / "src"))

from rnnbench import results_file  # noqa: E402
from rnnbench.report.charts.mode_speed import ROAD_LABELS, road_speeds  # noqa: E402
from rnnbench.report.charts.style import latest_rows  # noqa: E402

records = results_file.load(sorted(HERE.glob("*.jsonl")))
for (model, sizes, dtype, _, _), questions in road_speeds(records).items():
    for question, speeds in questions.items():
        print(f"\n{model} {sizes} {dtype}: {question} (speed-up over the row's vjp; CPU median ms, % of peak)\n")
        print("| driver | road | speed-up | ms | vjp ms | % peak |")
        print("|---|---|---|---|---|---|")
        for s in speeds:
            if s.speedup is None:
                print(f"| {s.series} | {ROAD_LABELS[s.road]} | - ({s.why}) | - | - | - |")
                continue
            peak = f"{100 * s.peak:.2g}" if s.peak is not None else "-"
            print(f"| {s.series} | {ROAD_LABELS[s.road]} | {s.speedup:.3g}x | {s.ms:.4g} | {s.vjp_ms:.4g} | {peak} |")
print("\n| model | driver | mode | status | load at start / end | CPU share | timing marks |")
print("|---|---|---|---|---|---|---|")
for r in latest_rows(records):
    if r["status"] == "unavailable":  # the named drivers' rows in the second environment, not created here
        continue
    cpu = r.get("cpu") or {}
    loads = "/".join(f"{(cpu.get(k) or [float('nan')])[0]:.1f}" for k in ("load_start", "load_end"))
    share = f"{cpu['cpu_ratio']:.2f}" if cpu.get("cpu_ratio") is not None else "-"
    marks = ",".join((r.get("timing") or {}).get("marks") or []) or "-"
    print(f"| {r['model']} | {r['driver']} | {r.get('mode', 'vjp')} | {r['status']} | {loads} | {share} | {marks} |")
