"""Undecided rows before (a replay on the judge before issue 49) and now (the campaign's records), on the
same edge2 bodies: rows per first-order status and per H v status, over the bodies the replay reached.
Usage: python compare_counts.py REPLAY.jsonl RECORDS.jsonl.gz [NEW_REPLAY.jsonl]"""

import collections
import gzip
import json
import sys

replay = [json.loads(line) for line in open(sys.argv[1])]
records = {}
for line in gzip.open(sys.argv[2], "rt"):
    r = json.loads(line)
    if r.get("model", "").startswith("fuzz:"):
        records[(int(r["model"].split(":")[2]), r["driver"])] = r
reached = {r["index"] for r in replay}
before, now = collections.Counter(), collections.Counter()
for r in replay:
    kind = "token body" if r["tokens"] else "float body"
    if "crash" in r:
        before[(kind, "crash (before the drivers ran)")] += 1
    elif "ill_conditioned" in r:
        before[(kind, "ill-conditioned body")] += 1
    else:
        for status, hvp in r["outcomes"].values():
            before[(kind, f"first order {status}")] += 1
            if hvp is not None and status != "crash":
                before[(kind, f"H v {hvp}")] += 1
    for d in ("torch_loop", "jax_loop", "jax_lax_scan"):
        rec = records.get((r["index"], d))
        if rec is None:
            continue
        now[(kind, f"first order {rec['status']}")] += 1
        if rec.get("hvp_status") not in (None, "None"):
            now[(kind, f"H v {rec['hvp_status']}")] += 1
print(f"bodies reached: {len(reached)} (token bodies {sum(r['tokens'] for r in replay)})")
for key in sorted(set(before) | set(now)):
    print(f"{key[0]:11s} {key[1]:40s} before {before[key]:5d}   now {now[key]:5d}")
if len(sys.argv) > 3:  # the replay on today's judge agrees with the campaign's records?
    new = {r["index"]: r for r in map(json.loads, open(sys.argv[3]))}
    same = diff = 0
    for i, r in new.items():
        for d, (status, hvp) in r.get("outcomes", {}).items():
            rec = records.get((i, d))
            if rec is None:
                continue
            ok = rec["status"] == status and str(rec.get("hvp_status")) == str(hvp)
            same, diff = same + ok, diff + (not ok)
            if not ok:
                print("differs:", i, d, (status, hvp), (rec["status"], rec.get("hvp_status")))
    print(f"today's judge replayed vs the campaign's records: {same} rows the same, {diff} differ")
