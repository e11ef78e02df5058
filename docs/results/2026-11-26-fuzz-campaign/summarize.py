"""Summary of the campaign's records (fuzz-float64.jsonl.gz, fuzz-float32.jsonl.gz beside this script):
bodies every driver finished, statuses per driver, the oracle rungs, and every reason a check could
not decide. Usage: python docs/results/2026-11-26-fuzz-campaign/summarize.py [FOLDER] (default: this
script's folder; docs/results/2026-11-26-fuzz-1000 for the 1000-body campaign)"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).parent


def reason(report: str) -> str:
    """The kind of bound that kept an undecided entry from a verdict (one line, no numbers)."""
    for pattern, label in (("float64 rounding alone does to H v", "float64 rounding of H v (dual_mp_hvp)"),
                           ("float64 rounding alone does to this gradient",
                            "float64 rounding of the gradient (dual_mp)"),
                           ("float32 rounding alone does", "float32 rounding of the gradient (float32 tape)"),
                           ("condition number", "float rounding of the loss (its condition number)"),
                           ("not smooth", "finite differences: loss not smooth at the step"),
                           ("no derivative", "no derivative at the point")):
        if pattern in report:
            return label
    return "other: " + re.sub(r"[-+0-9.e]+", "#", report.splitlines()[0])[:80]


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for path in sorted(folder.glob("fuzz-*.jsonl.gz")):
        records = [json.loads(line) for line in gzip.open(path, "rt") if line.strip()]
        from rnnbench.cli.fuzz import fuzz_drivers

        drivers = sorted(d.name for d in fuzz_drivers(None, records[0]["dtype"]))  # the default set
        per_case = defaultdict(set)
        for r in records:
            per_case[r["case"]].add(r["driver"])
        done = [c for c, ds in per_case.items() if "-" in ds or set(drivers) <= ds]
        bodies = {c // 4 for c in done}
        complete_bodies = sorted(b for b in bodies if all(4 * b + k in done for k in range(4)))
        print(f"== {path.name}: {len(records)} records; {len(complete_bodies)} bodies x 4 loss forms complete on all "
              f"{len(drivers)} drivers ({', '.join(drivers)})")
        status, hvp, kinds, undecided = defaultdict(Counter), defaultdict(Counter), Counter(), Counter()
        for r in records:
            status[r["driver"]][r["status"]] += 1
            if r.get("hvp_status"):
                hvp[r["driver"]][r["hvp_status"]] += 1
            if r.get("oracle_kind"):
                kinds[r["oracle_kind"]] += 1
            if r["status"] == "cannot_decide" or r.get("hvp_status") == "ill_conditioned":
                undecided[reason(r.get("report") or "")] += 1
        for d in sorted(status):
            print(f"  {d:<22} first order {dict(status[d])}; H v {dict(hvp[d]) or '-'}")
        judged = sum(sum(c.values()) for d, c in status.items() if d != "-")
        n_undecided = sum(status[d]["cannot_decide"] for d in status)
        print(f"  cannot_decide: {n_undecided} of {judged} outcomes ({100 * n_undecided / max(judged, 1):.2f} %); "
              f"reasons (first order and H v): {dict(undecided)}")
        print(f"  oracle kinds: {dict(kinds)}")
        wrong = sum(status[d][s] for d in status for s in ("grad_mismatch", "missing_grad", "forward_mismatch"))
        print(f"  grad_mismatch + missing_grad + forward_mismatch: {wrong}; hvp_mismatch: "
              f"{sum(hvp[d]['hvp_mismatch'] for d in hvp)}")


if __name__ == "__main__":
    main()
