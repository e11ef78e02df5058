"""The A/A study's numbers (docs/results/2026-11-28-aa-study.md) from its records.

    python analyze.py RECORDS_DIR NOW_TREE BEFORE_TREE PYTHON

For each pair (condition, i): `rnnbench compare base new --format json` with the tree under study
(NOW_TREE) and with the tree before it (BEFORE_TREE): each row's verdict and the exit code. A row
other than aa_planted named slower or faster is a false verdict; aa_planted named slower is the
planted 2x found. Then planted slowdowns on the records (power): the new side of every pair has
its torch_loop and jax_lax_scan samples (CPU and wall) multiplied by a factor, and the fraction of
pairs in which that row is named slower is the power at that factor."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

FACTORS = (1.05, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0)


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
        rows.append((condition, i, exit_now, now_v, exit_before, before_v))
        b, n = record.load([base]), record.load([new])
        for driver in ("torch_loop", "jax_lax_scan"):
            for factor in FACTORS:
                result = compare(b, scaled(n, driver, factor), threshold=0.1, alpha=0.01)
                verdict = next(p.verdict for p in result.pairs if p.key.driver == driver)
                power[(condition, driver, factor)].append(verdict == "slower")
    drivers = ("torch_loop", "jax_lax_scan", "aa_planted")
    print(
        "| pair | exit now | "
        + " | ".join(f"{d} now" for d in drivers)
        + " | exit before | "
        + " | ".join(f"{d} before" for d in drivers)
        + " |"
    )
    print("|" + "---|" * (2 * len(drivers) + 3))
    for condition, i, en, nv, eb, bv in rows:
        print(
            f"| {condition} {i} | {en} | "
            + " | ".join(nv.get(d, "-") for d in drivers)
            + f" | {eb} | "
            + " | ".join(bv.get(d, "-") for d in drivers)
            + " |"
        )
    print()
    for condition in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == condition]
        for label, verdicts in (("now", 3), ("before", 5)):
            false = sum(any(r[verdicts].get(d) in ("slower", "faster") for d in drivers[:2]) for r in mine)
            found = sum(r[verdicts].get("aa_planted") == "slower" for r in mine)
            print(
                f"{condition} {label}: {len(mine)} pairs, pairs with a false slower/faster on an unchanged row: "
                f"{false}; planted 2x named slower: {found}/{len(mine)}"
            )
    print()
    print("| condition | driver | " + " | ".join(f"{f:g}x" for f in FACTORS) + " |")
    print("|" + "---|" * (len(FACTORS) + 2))
    for condition in sorted({c for c, _, _ in power}):
        for driver in ("torch_loop", "jax_lax_scan"):
            cells = [power[(condition, driver, f)] for f in FACTORS]
            print(f"| {condition} | {driver} | " + " | ".join(f"{sum(c)}/{len(c)}" for c in cells) + " |")


if __name__ == "__main__":
    main(*sys.argv[1:5])
