"""The realistic suite's records as one markdown table: a row per model and size, a column per
driver, fwd+bwd median ms (or the row's status when it has no time), and the speed-up of each
driver over its framework's vendor layer in brackets where that ran.

    python docs/results/2026-11-26-realistic/pivot.py docs/results/2026-11-26-realistic/*.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

from rnnbench import record
from rnnbench.report.bars import timed
from rnnbench.report.style import latest_rows

DRIVERS = ("torch_nn_rnn", "torch_nn_lstm", "torch_loop", "torch_scan_compiled", "flax_simple_cell", "flax_lstm_cell",
           "jax_lax_scan", "flax_scan")


def main(paths: list[Path]) -> None:
    records = [r for r in latest_rows(record.load(paths)) if r["status"] != "unavailable"]
    cells: dict[tuple, dict[str, dict]] = {}
    for r in records:
        s = r["sizes"]
        cells.setdefault((r["model"], s["T"], s["H"]), {})[r["driver"]] = r
    shown = [d for d in DRIVERS if any(d in row for row in cells.values())]
    print("| model | T | I=H | " + " | ".join(shown) + " |\n|---|---|---|" + "---|" * len(shown))
    for (model, T, H), row in sorted(cells.items()):
        vendor = {r["framework_family"]: r["fwd_bwd"]["median_ms"] for r in row.values() if r.get("anchor") and timed(r)}
        out = []
        for d in shown:
            r = row.get(d)
            if r is None:
                out.append("")
            elif not timed(r):
                out.append(r["status"])
            else:
                ms, ref = r["fwd_bwd"]["median_ms"], vendor.get(r["framework_family"])
                out.append(f"{ms:.0f}" + (f" ({ref / ms:.2f}x)" if ref and not r.get("anchor") else ""))
        print(f"| {model} | {T} | {H} | " + " | ".join(out) + " |")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
