"""Counts of docs/results/2026-11-28-edge-campaign-1000.md from its records: per campaign file and dtype,
the bodies judged on every driver, the statuses per driver and per op class (first order; H v as
"hvp:<status>"), every outcome that is not ok classed (known issue, crash, flagged wrong, cannot_decide /
subgradient_differs / ill_conditioned with the reason the report gives), and for a planted campaign the
plant's verdicts per driver. Usage: python summarize.py [FOLDER]."""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from tabulate import tabulate

from rnnbench.fuzz.campaign import body_from_fields, is_ill, outcome_from_record
from rnnbench.fuzz.edges import parse_plant
from rnnbench.fuzz.outcome import ERRORS, FIRST_ORDER_FAILURES
from rnnbench.fuzz.summary import plant_verdict
from rnnbench.status import Status, is_known

REASONS = (  # (pattern, label): every one found in a report is named, in this order
    (re.compile(r"no derivative at this point \(([^)]*)\)"), None),
    (re.compile(r"no range of subgradients"), "no range of subgradients (too many ties or a pole)"),
    (re.compile(r"NaN in the oracle"), "NaN in the oracle at some entries"),
    (re.compile(r"disagrees with itself between step sizes"), "difference oracle disagrees with itself"),
    (re.compile(r"within what float64 rounding"), "within what float64 rounding does"),
    (re.compile(r"passes a kink whose conventions were not enumerated"), "H v beside a kink whose corners are not enumerated"),
)


def records(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def reason(report: str) -> str:
    """The reasons the report gives for an undecided verdict, each named once."""
    found: list[str] = []
    for pattern, label in REASONS:
        for m in pattern.finditer(report or ""):
            text = label or m.group(1)
            if text not in found:
                found.append(text)
    if not report:  # fuzz records before 389dfee drop an undecided first order's report where H v came out ok
        return "no report kept (H v ok)"
    return ", ".join(found) or "no reason found"


def classify(o, planted: bool) -> str | None:
    """The class of a (body, driver) outcome that is not plainly ok; None for ok (and H v ok)."""
    if is_known(o.status) or is_known(o.hvp_status):
        return f"known issue {o.status if is_known(o.status) else o.hvp_status}"
    if o.status in ERRORS or o.hvp_status in ERRORS:
        return f"crash ({o.status}, H v {o.hvp_status})"
    if not planted and (o.status in FIRST_ORDER_FAILURES or o.hvp_status == Status.HVP_MISMATCH):
        return f"flagged wrong ({o.status}, H v {o.hvp_status}): false alarm or a real bug, see findings"
    if o.status in (Status.CANNOT_DECIDE, Status.SUBGRADIENT_DIFFERS):
        return f"{o.status}: {reason(o.report)}"
    if o.hvp_status == Status.ILL_CONDITIONED:
        return f"H v ill_conditioned: {reason(o.report)}"
    if o.status != Status.OK or o.hvp_status not in (None, Status.OK):
        return None if planted else f"other ({o.status}, H v {o.hvp_status})"
    return None


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
        complete = {c for c, d in per_case.items() if d == set(drivers)}
        print(f"\n### {path.name}, {dtype}")
        print(f"bodies judged on every driver: {len(complete)} (+ {len(ill)} ill-conditioned, not judged)")
        grammar = mine[0]["settings"].get("grammar", {})
        print(f"grammar: {grammar}")
        plant = grammar.get("plant", "")
        kind, family = parse_plant(plant) if plant else ("", "")
        by_driver: dict[str, Counter] = defaultdict(Counter)
        by_op: dict[str, Counter] = defaultdict(Counter)
        plants: dict[str, Counter] = defaultdict(Counter)
        classes: Counter = Counter()
        cases: dict[str, list] = defaultdict(list)
        for r in mine:
            if is_ill(r) or r["case"] not in complete:
                continue
            o = outcome_from_record(r)
            keys = [str(o.status)] + ([f"hvp:{o.hvp_status}"] if o.hvp_status else [])
            by_driver[o.driver].update(keys)
            for op in body_from_fields(r["body"]).op_classes():
                by_op[op].update(keys)
            planted = bool(plant) and r["framework_family"] == family
            if planted:
                plants[o.driver][plant_verdict(o, kind)] += 1
            label = classify(o, planted)
            if label is not None:
                classes[label] += 1
                cases[label].append(f"{o.index}/{o.driver}")
        for title, table in (("driver", by_driver), ("op class", by_op)):
            cols = sorted({k for c in table.values() for k in c})
            print(tabulate([[k, *(c[s] for s in cols)] for k, c in sorted(table.items())], [title, *cols], "github"))
            print()
        print("outcomes that are not plainly ok, classed (count; body/driver):")
        for label, n in sorted(classes.items()):
            shown = ", ".join(cases[label][:12]) + (" ..." if len(cases[label]) > 12 else "")
            print(f"- {label}: {n} ({shown})")
        if plant:
            print(f"plant {plant}: " + "; ".join(f"{d}: {dict(c)}" for d, c in sorted(plants.items())))


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    for p in sorted(folder.glob("fuzz-*.jsonl*")):
        summarize(p)
