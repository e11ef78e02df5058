"""Counts of the 2026-12-07 edge campaign (run.sh) from its records. Per campaign file and dtype: the
bodies judged on every driver; outcomes by status per driver (first order; H v as "hvp:<status>");
crashes; wrong verdicts on an unplanted driver, split into false alarms (one framework flagged: a
false alarm or a framework bug, to look at) and framework-convention findings (every framework's
drivers flagged with the same got values: the frameworks agree on a value the oracle calls wrong, as
a split tie's halved H v); cannot_decide / subgradient_differs / ill_conditioned with the reasons
their reports give; the plant's verdicts. Then, for part (a) (the edge grammar, seed 1128), the
undecided counts before (the 2026-11-28 campaign's records, the newest per dtype) and now, on the
bodies both judged. Usage: python summarize.py [FOLDER] (default: beside this script)."""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from rnnbench.fuzz.campaign import body_from_fields, is_ill, outcome_from_record
from rnnbench.fuzz.edges import parse_plant
from rnnbench.fuzz.outcome import ERRORS, FIRST_ORDER_FAILURES
from rnnbench.fuzz.summary import plant_verdict
from rnnbench.status import Status, is_known

BEFORE = Path(__file__).resolve().parent.parent / "2026-11-28-edge-campaign-1000"
# the newest records of the 2026-11-28 campaign per dtype, first found first (the float64 re-run at d301add)
BEFORE_FILES = ("rerun-866cc59/fuzz-{dtype}.jsonl.gz", "rerun-d301add/fuzz-{dtype}.jsonl.gz", "fuzz-{dtype}.jsonl.gz")
REASONS = (  # (pattern, label): every one found in a report is named, in this order
    (re.compile(r"no derivative at this point \(([^)]*)\)"), None),
    (
        re.compile(r"no range of subgradients"),
        "no range of subgradients (a pole, or ties interval tangents cannot bound)",
    ),
    (re.compile(r"not finite beside a pole"), "H v not finite beside a pole"),
    (re.compile(r"NaN in the oracle"), "NaN in the oracle at some entries"),
    (re.compile(r"disagrees with itself between step sizes"), "difference oracle disagrees with itself"),
    (re.compile(r"within what float64 rounding"), "within what float64 rounding does"),
    (re.compile(r"within what float32 rounding"), "within what float32 rounding does"),
    (
        re.compile(r"passes a kink whose conventions were not enumerated"),
        "H v beside a kink whose corners are not enumerated",
    ),
    (re.compile(r"one convention among others"), "H v within the kinks' corners (a tie v crosses)"),
    (re.compile(r"the loss is not smooth at the finite-difference step"), "loss not smooth at the difference step"),
)
UNDECIDED = (Status.CANNOT_DECIDE, Status.SUBGRADIENT_DIFFERS)
WRONG_LINE = re.compile(r"!! (\S+)\s+mismatch .*?at \[([^\]]*)\]: got (\S+), want")


def records(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [r for r in map(json.loads, filter(str.strip, f)) if r.get("kind", "fuzz") == "fuzz" and "status" in r]


def reason(report: str) -> str:
    """The reasons the report gives for an undecided verdict, each named once."""
    found: list[str] = []
    for pattern, label in REASONS:
        for m in pattern.finditer(report or ""):
            text = label or m.group(1)
            if text not in found:
                found.append(text)
    return ", ".join(found) or ("no report kept" if not report else "no reason found")


def wrong(o) -> bool:
    return o.status in FIRST_ORDER_FAILURES or o.hvp_status == Status.HVP_MISMATCH


def got_values(report: str) -> tuple:
    """(input, entry, got to 6 digits) of each mismatch line: what a driver's wrong verdict rests on."""
    return tuple(sorted((n, i, f"{float(g):.6g}") for n, i, g in WRONG_LINE.findall(report or "")))


def complete(recs: list[dict]) -> tuple[list[str], dict[int, dict[str, dict]], set[int]]:
    """(the drivers, per body judged on every driver its records by driver, the ill-conditioned bodies)."""
    drivers = sorted({r["driver"] for r in recs if not is_ill(r)})
    per_case: dict[int, dict[str, dict]] = defaultdict(dict)
    for r in recs:
        if not is_ill(r):
            per_case[r["case"]][r["driver"]] = r
    ill = {r["case"] for r in recs if is_ill(r)}
    return drivers, {c: d for c, d in per_case.items() if set(d) == set(drivers)}, ill


def summarize(path: Path) -> None:
    recs = records(path)
    for dtype in sorted({r["dtype"] for r in recs}):
        drivers, cases, ill = complete([r for r in recs if r["dtype"] == dtype])
        if not cases:
            continue
        grammar = next(iter(next(iter(cases.values())).values()))["settings"].get("grammar", {})
        plant = grammar.get("plant", "")
        kind, family = parse_plant(plant) if plant else ("", "")
        print(f"\n### {path.name}, {dtype}: {len(cases)} bodies judged on every driver (+ {len(ill)} ill-conditioned)")
        print(f"grammar: {grammar}")
        by_driver: dict[str, Counter] = defaultdict(Counter)
        classes: dict[str, list[str]] = defaultdict(list)
        plants: dict[str, Counter] = defaultdict(Counter)
        for case, by in sorted(cases.items()):
            outcomes = {d: outcome_from_record(r) for d, r in by.items()}
            families = {d: r["framework_family"] for d, r in by.items()}
            unplanted = {d: o for d, o in outcomes.items() if not (plant and families[d] == family)}
            flagged = {d for d, o in unplanted.items() if wrong(o)}
            # every framework's drivers flagged, on the same got values: a framework convention, not a false alarm
            convention = (
                flagged == set(unplanted)
                and len({families[d] for d in flagged}) > 1
                and len({got_values(unplanted[d].report) for d in flagged}) == 1
            )
            for d, o in outcomes.items():
                by_driver[d].update([str(o.status)] + ([f"hvp:{o.hvp_status}"] if o.hvp_status else []))
                label = f"{case}/{d}"
                if d not in unplanted:
                    plants[d][plant_verdict(o, kind)] += 1
                if is_known(o.status) or is_known(o.hvp_status):
                    classes[f"known issue {o.status if is_known(o.status) else o.hvp_status}"].append(label)
                elif o.status in ERRORS or o.hvp_status in ERRORS:
                    classes[f"CRASH ({o.status}, H v {o.hvp_status})"].append(label)
                elif d in flagged:
                    what = (
                        "every framework flagged on the same values (a framework convention, e.g. a split tie, or "
                        "an oracle error: look at each)"
                        if convention
                        else "FALSE ALARM (or a framework bug: one framework flagged)"
                    )
                    ops = ",".join(sorted(body_from_fields(by[d]["body"]).op_classes()))
                    classes[f"{what} ({o.status}, H v {o.hvp_status}) [{ops}]"].append(label)
                elif d in unplanted and o.status in UNDECIDED:
                    classes[f"{o.status}: {reason(o.report)}"].append(label)
                elif d in unplanted and o.hvp_status == Status.ILL_CONDITIONED:
                    classes[f"H v ill_conditioned: {reason(o.report)}"].append(label)
        print(
            "outcomes per driver: " + "; ".join(f"{d}: {dict(sorted(c.items()))}" for d, c in sorted(by_driver.items()))
        )
        print("not plainly ok, classed (count: body/driver):")
        for label, where in sorted(classes.items()):
            print(f"- {label}: {len(where)} ({', '.join(where[:10])}{' ...' if len(where) > 10 else ''})")
        alarms = sum(len(w) for lab, w in classes.items() if lab.startswith("FALSE ALARM"))
        crashes = sum(len(w) for lab, w in classes.items() if lab.startswith("CRASH"))
        print(f"false alarms: {alarms}; crashes: {crashes}")
        if plant:
            print(f"plant {plant}: " + "; ".join(f"{d}: {dict(c)}" for d, c in sorted(plants.items())))


UNDECIDED_KINDS = ("cannot_decide", "H v ill_conditioned", "subgradient_differs")


def undecided(by: dict[str, dict]) -> Counter:
    """Per (driver, kind) 1 where the body's outcome is of that undecided kind: a first order
    cannot_decide, an H v ill_conditioned, or a subgradient convention (subgradient_differs)."""
    out: Counter = Counter()
    for d, r in by.items():
        o = outcome_from_record(r)
        out[d, "cannot_decide"] += int(o.status == Status.CANNOT_DECIDE)
        out[d, "H v ill_conditioned"] += int(o.hvp_status == Status.ILL_CONDITIONED)
        out[d, "subgradient_differs"] += int(o.status == Status.SUBGRADIENT_DIFFERS)
    return out


def compare_before(folder: Path) -> None:
    """Part (a) against the 2026-11-28 campaign, on the bodies both judged on every driver both ran."""
    for dtype in ("float64", "float32"):
        now_path = next(
            (p for p in (folder / f"fuzz-edge-{dtype}.jsonl", folder / f"fuzz-edge-{dtype}.jsonl.gz") if p.exists()),
            None,
        )
        before_path = next(
            (BEFORE / f.format(dtype=dtype) for f in BEFORE_FILES if (BEFORE / f.format(dtype=dtype)).exists()), None
        )
        if now_path is None or before_path is None:
            continue
        d_now, now, _ = complete(records(now_path))
        d_before, before, _ = complete(records(before_path))
        drivers = sorted(set(d_now) & set(d_before))
        common = sorted(set(now) & set(before))
        before_n, now_n = Counter(), Counter()
        for c in common:
            before_n.update(undecided({d: before[c][d] for d in drivers}))
            now_n.update(undecided({d: now[c][d] for d in drivers}))
        print(
            f"\n### part (a) {dtype}: undecided rows on the {len(common)} bodies both judged ({before_path.relative_to(BEFORE.parent)} -> {now_path.name})"
        )
        for d in [*drivers, "all"]:
            pick = (lambda k, d=d: [x for x in k if x[0] == d]) if d != "all" else (lambda k: list(k))
            counts = [
                f"{kind} {sum(before_n[x] for x in pick(before_n) if x[1] == kind)} -> "
                f"{sum(now_n[x] for x in pick(now_n) if x[1] == kind)}"
                for kind in UNDECIDED_KINDS
            ]
            print(f"- {d}: " + ", ".join(counts))
        changed = [
            f"{c}/{d}: {outcome_from_record(before[c][d]).status}/{before[c][d].get('hvp_status')} -> "
            f"{outcome_from_record(now[c][d]).status}/{now[c][d].get('hvp_status')}"
            for c in common
            for d in drivers
            if (before[c][d]["status"], before[c][d].get("hvp_status"))
            != (now[c][d]["status"], now[c][d].get("hvp_status"))
        ]
        print(
            f"verdicts changed: {len(changed)}"
            + "".join(f"\n  {x}" for x in changed[:40])
            + (" ..." if len(changed) > 40 else "")
        )


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    for path in sorted(folder.glob("fuzz-*.jsonl*")):
        summarize(path)
    compare_before(folder)
