"""Counts of docs/results/2026-11-28-edge-campaign.md from its records: per campaign file, the bodies
judged on every driver, the statuses per driver and per op class (first order; H v as "hvp:<status>"),
and for a planted campaign the plant's verdicts. Usage: python summarize.py [FOLDER]."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from tabulate import tabulate

from rnnbench.fuzz.campaign import body_from_fields, is_ill, outcome_from_record
from rnnbench.fuzz.edges import parse_plant
from rnnbench.fuzz.summary import plant_verdict


def records(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def summarize(path: Path) -> None:
    recs = [r for r in records(path) if r.get("kind", "fuzz") == "fuzz" and "status" in r]
    for dtype in sorted({r["dtype"] for r in recs}):
        mine = [r for r in recs if r["dtype"] == dtype]
        drivers = sorted({r["driver"] for r in mine if not is_ill(r)})
        per_case = defaultdict(set)
        for r in mine:
            if not is_ill(r):
                per_case[r["case"]].add(r["driver"])
        ill = {r["case"] for r in mine if is_ill(r)}
        complete = [c for c, d in per_case.items() if d == set(drivers)]
        print(f"\n### {path.name}, {dtype}")
        print(f"bodies judged on every driver: {len(complete)} (+ {len(ill)} ill-conditioned, not judged)")
        grammar = mine[0]["settings"].get("grammar", {})
        print(f"grammar: {grammar}")
        by_driver: dict[str, Counter] = defaultdict(Counter)
        by_op: dict[str, Counter] = defaultdict(Counter)
        plants: dict[str, Counter] = defaultdict(Counter)
        plant = grammar.get("plant", "")
        for r in mine:
            if is_ill(r) or r["case"] not in complete:
                continue
            o = outcome_from_record(r)
            keys = [str(o.status)] + ([f"hvp:{o.hvp_status}"] if o.hvp_status else [])
            by_driver[o.driver].update(keys)
            for op in body_from_fields(r["body"]).op_classes():
                by_op[op].update(keys)
            if plant and r["framework_family"] == parse_plant(plant)[1]:
                plants[o.driver][plant_verdict(o, parse_plant(plant)[0])] += 1
        for title, table in (("driver", by_driver), ("op class", by_op)):
            cols = sorted({k for c in table.values() for k in c})
            print(tabulate([[k, *(c[s] for s in cols)] for k, c in sorted(table.items())], [title, *cols], "github"))
            print()
        if plant:
            print(f"plant {plant}: " + "; ".join(f"{d}: {dict(c)}" for d, c in sorted(plants.items())))


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    for p in sorted(folder.glob("fuzz-*.jsonl*")):
        summarize(p)
