"""python diff_verdicts.py BEFORE_DIR AFTER_DIR: the verdicts and record fields of two runs of measure.sh.

Per row (keyed by model, driver, dtype, loss form and fuzz case): status, raw status, oracle kind, H v
status, repeatability and localization must agree; so must the set of field paths (values that are
times or machine facts differ by nature). Exit 0 when everything agrees."""

import json
import sys
from collections import Counter
from pathlib import Path

BEFORE, AFTER = Path(sys.argv[1]), Path(sys.argv[2])
ADDED = {"run_id"}  # issue 41: one id per run, so compare counts a repeated record once
FLAT = ("sizes", "body", "minimal", "versions", "by_size", "by_framework_best", "compile_cache", "errors")


def paths(d: dict, prefix: str = "") -> set:
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict) and k not in FLAT:
            out |= paths(v, prefix + k + ".")
    return out


def key(r: dict) -> tuple:
    return (r["model"], r["driver"], r["dtype"], r.get("loss_form"), r.get("case"))


def verdict(r: dict) -> tuple:
    hvp, rep = r.get("hvp") or {}, r.get("repeatable") or {}
    kinds = (r.get("raw_status"), r.get("oracle_kind"), r.get("hvp_status"), hvp.get("status"))
    return (r["status"], *kinds, rep.get("bitwise"), bool(r.get("localization")))


def compare_records(name: str) -> bool:
    b = {key(r): r for r in map(json.loads, open(BEFORE / name))}
    a = {key(r): r for r in map(json.loads, open(AFTER / name))}
    both = [k for k in b if k in a]
    verdicts = [(k, verdict(b[k]), verdict(a[k])) for k in both if verdict(b[k]) != verdict(a[k])]
    fields = [(k, paths(b[k]) ^ (paths(a[k]) - ADDED)) for k in both if paths(b[k]) != paths(a[k]) - ADDED]
    added = sum(1 for k in both if ADDED <= paths(a[k]) - paths(b[k]))
    reports = [k for k in both if b[k].get("report") != a[k].get("report")]
    print(
        f"{name}: {len(b)} rows before, {len(a)} after, {len(set(b) ^ set(a))} on one side only, "
        f"{len(verdicts)} verdict differences, {len(fields)} field-set differences; "
        f"run_id added on {added} rows; report text differs on {len(reports)} rows"
    )
    print("   statuses before:", dict(Counter(r["status"] for r in b.values())))
    print("   statuses after: ", dict(Counter(r["status"] for r in a.values())))
    for k in reports[:3]:
        diff = [(x, y) for x, y in zip(b[k]["report"].splitlines(), a[k]["report"].splitlines()) if x != y]
        print("   report", k, "differs on lines:", diff)
    for row in verdicts[:10] + fields[:10]:
        print("   DIFFERS", row)
    return not verdicts and not fields and set(a) == set(b)


def compare_readme() -> bool:
    b, a = json.load(open(BEFORE / "readme.json")), json.load(open(AFTER / "readme.json"))

    def rows(rep: dict) -> list:
        return [(r["driver"], r["loss"], r["status"], r["hvp_status"], sorted(r)) for r in rep["rows"]]

    same = rows(a) == rows(b) and (a["oracle_kind"], a["ok"]) == (b["oracle_kind"], b["ok"])
    print(
        f"readme example: {len(b['rows'])} rows before, {len(a['rows'])} after; oracle {b['oracle_kind']} -> "
        f"{a['oracle_kind']}; ok {b['ok']} -> {a['ok']}; verdicts and fields {'identical' if same else 'DIFFER'}"
    )
    return same


checks = [compare_readme()] + [compare_records(f"{n}.jsonl") for n in ("default", "fuzz-0", "fuzz-2027")]
sys.exit(0 if all(checks) else 1)
