"""Counts of the per_example campaign's records: per file and driver, the outcomes by status; the
planted outcomes' verdicts (a planted driver's row must be grad_mismatch or missing_grad); the
undecided rows' reasons (their reports' last lines). usage: summarize.py [FOLDER] (default: beside it)."""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

WRONG = {"grad_mismatch", "missing_grad", "forward_mismatch"}


def main(folder: Path) -> None:
    for path in sorted(folder.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not records:
            print(f"== {path.name}: no records")
            continue
        planted = records[0]["settings"].get("grammar", {}).get("plant", "") if records else ""
        family = planted.partition(":")[2]
        print(f"== {path.name}: {len(records)} records, mode {records[0].get('mode')}, dtype {records[0]['dtype']}")
        by_driver: dict[str, Counter] = defaultdict(Counter)
        for rec in records:
            by_driver[rec["driver"]][rec["status"]] += 1
        for driver, counts in sorted(by_driver.items()):
            print(f"  {driver:<14} {dict(sorted(counts.items()))}")
        if family:
            verdicts = Counter(
                "caught" if rec["status"] in WRONG else "missed" if rec["status"] == "ok" else rec["status"]
                for rec in records
                if rec.get("framework_family") == family
            )
            print(f"  planted ({planted}): {dict(verdicts)}")
        unplanted = [r for r in records if r["driver"] != "-" and (not family or r.get("framework_family") != family)]
        alarms = [r for r in unplanted if r["status"] in WRONG]
        errors = [r for r in unplanted if r["status"] in ("error", "compile_error", "crash", "timeout")]
        print(f"  unplanted rows: {len(unplanted)}, false alarms {len(alarms)}, errors or crashes {len(errors)}")
        undecided = Counter(
            (r["status"], (r.get("report") or "").strip().splitlines()[-1][:110])
            for r in unplanted
            if r["status"] in ("cannot_decide", "subgradient_differs")
        )
        for (status, why), n in undecided.most_common(6):
            print(f"    {n:>3} {status}: {why}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
