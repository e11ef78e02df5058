"""The second A/A study's numbers (docs/results/2026-11-28-aa-study-2.md) from its records.

    python analyze.py RECORDS_DIR NOW_TREE BEFORE_TREE PYTHON

For each pair (condition, i): `rnnbench compare base new --format json` with the tree under study
(NOW_TREE: each row relative to its run's machine-speed reference) and with the tree before it
(BEFORE_TREE: raw CPU times, the first study's rules), on the same records: each row's verdict and
the exit code. A row other than aa_planted named slower or faster is a false verdict; aa_planted
named slower is the planted 2x found. Then planted slowdowns on the records (power): the new side of
every pair has its torch_loop and jax_lax_scan samples (CPU and wall, not the reference's)
multiplied by a factor, and the fraction of pairs in which that row is named slower. Last, how far
each row's statistic moved between processes, raw and relative to the reference."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

FACTORS = (1.05, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0)
DRIVERS = ("torch_loop", "jax_lax_scan", "aa_planted")


def cli_compare(tree: str, python: str, base: Path, new: Path) -> tuple[int, dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": tree, "RNNBENCH_PLUGINS": "rnnbench_aa_planted"}
    done = subprocess.run(
        [python, "-m", "rnnbench", "compare", str(base), str(new), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"compare {base} {new}: exit {done.returncode}: {done.stderr.strip()}")
    out = json.loads(done.stdout)
    return done.returncode, {row["driver"]: row["verdict"] for row in out["rows"]}


def scaled(records: list[dict], driver: str, factor: float) -> list[dict]:
    """The records with one driver's timed calls `factor` times slower (its reference untouched)."""
    out = copy.deepcopy(records)
    for rec in out:
        if rec["driver"] != driver or rec.get("status") != "ok":
            continue
        for q in ("fwd_bwd", "fwd"):
            t = rec.get(q)
            if not t:
                continue
            for key in ("samples", "cpu_samples"):
                if t.get(key):
                    t[key] = [x * factor for x in t[key]]
            for key in ("median_ms", "q1_ms", "q3_ms", "min_ms", "max_ms", "cpu_median_ms"):
                if t.get(key) is not None:
                    t[key] *= factor
    return out


def spread(folder: str) -> None:
    """Per condition and row, the 10th percentile of fwd+bwd CPU times of every run: max / min over
    the runs, raw and divided by the run's own reference statistic; and the reference's largest
    move within one run (its halves)."""
    stats: dict[tuple[str, str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for path in sorted(Path(folder).glob("*.jsonl")):
        condition, _, side = path.stem.split("-")
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            t = rec.get("fwd_bwd") or {}
            if not t.get("ref_cpu_samples"):
                continue
            cpu, ref = np.array(t["cpu_samples"]), np.array(t["ref_cpu_samples"])
            half = len(ref) // 2
            halves = np.quantile(ref[:half], 0.1), np.quantile(ref[half:], 0.1)
            row, unit = np.quantile(cpu, 0.1), np.quantile(ref, 0.1)
            stats[(condition, rec["driver"], side)].append((row, row / unit, max(halves) / min(halves)))
    print(
        "| condition | driver | side | runs | raw max/min | relative max/min | raw cv | relative cv | ref moved (max) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (condition, driver, side), values in sorted(stats.items()):
        a = np.array(values)
        print(
            f"| {condition} | {driver} | {side} | {len(a)} | {a[:, 0].max() / a[:, 0].min():.3f} | "
            f"{a[:, 1].max() / a[:, 1].min():.3f} | {a[:, 0].std() / a[:, 0].mean():.3f} | "
            f"{a[:, 1].std() / a[:, 1].mean():.3f} | {a[:, 2].max():.2f} |"
        )


def main(folder: str, now: str, before: str, python: str) -> None:
    sys.path.insert(0, now)
    from rnnbench import record  # noqa: PLC0415 (the tree under study, put on the path above)
    from rnnbench.report.compare_pairs import compare  # noqa: PLC0415

    pairs = sorted(
        {tuple(p.name.split("-")[:2]) for p in Path(folder).glob("*-base.jsonl")}, key=lambda c: (c[0], int(c[1]))
    )
    rows = []
    power: dict[tuple[str, str, float], list[bool]] = defaultdict(list)
    for condition, i in pairs:
        base, new = (Path(folder) / f"{condition}-{i}-{side}.jsonl" for side in ("base", "new"))
        if not new.exists() or not new.read_text().strip() or not base.read_text().strip():
            continue
        exit_now, now_v = cli_compare(now, python, base, new)
        exit_before, before_v = cli_compare(before, python, base, new)
        b, n = record.load([base]), record.load([new])
        unchanged = [[r for r in side if r["driver"] != "aa_planted"] for side in (b, n)]
        exit_aa = compare(*unchanged, threshold=0.1, alpha=0.01).exit_code  # the A/A rows alone
        rows.append((condition, i, exit_now, now_v, exit_before, before_v, exit_aa))
        for driver in DRIVERS[:2]:
            for factor in FACTORS:
                result = compare(b, scaled(n, driver, factor), threshold=0.1, alpha=0.01)
                verdict = next(p.verdict for p in result.pairs if p.key.driver == driver)
                power[(condition, driver, factor)].append(verdict == "slower")
    print("| pair | A/A exit now | exit now | " + " | ".join(f"{d} now" for d in DRIVERS), end=" | ")
    print("exit before | " + " | ".join(f"{d} before" for d in DRIVERS) + " |")
    print("|" + "---|" * (2 * len(DRIVERS) + 4))
    for condition, i, en, nv, eb, bv, ea in rows:
        cells = [str(ea), str(en), *(nv.get(d, "-") for d in DRIVERS), str(eb), *(bv.get(d, "-") for d in DRIVERS)]
        print(f"| {condition} {i} | " + " | ".join(cells) + " |")
    print()
    for condition in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == condition]
        for label, verdicts, code in (("now", 3, 2), ("before", 5, 4)):
            false = sum(any(r[verdicts].get(d) in ("slower", "faster") for d in DRIVERS[:2]) for r in mine)
            found = sum(r[verdicts].get("aa_planted") == "slower" for r in mine)
            exits = sum(r[code] == 1 for r in mine)
            print(
                f"{condition} {label}: {len(mine)} pairs, pairs with a false slower/faster on an unchanged row: "
                f"{false}; planted 2x named slower: {found}/{len(mine)}; exit 1: {exits}/{len(mine)}"
                + (f"; the A/A rows alone exit 0: {sum(r[6] == 0 for r in mine)}/{len(mine)}" if label == "now" else "")
            )
    print()
    print("| condition | driver | " + " | ".join(f"{f:g}x" for f in FACTORS) + " |")
    print("|" + "---|" * (len(FACTORS) + 2))
    for condition in sorted({c for c, _, _ in power}):
        for driver in DRIVERS[:2]:
            cells = [power[(condition, driver, f)] for f in FACTORS]
            print(f"| {condition} | {driver} | " + " | ".join(f"{sum(c)}/{len(c)}" for c in cells) + " |")
    print()
    spread(folder)


if __name__ == "__main__":
    main(*sys.argv[1:5])
