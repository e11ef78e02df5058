"""Row by row, before (the replay on the judge before issue 49) -> now (the campaign's records): how each undecided
row moved. Usage: python transitions.py REPLAY.jsonl RECORDS.jsonl.gz"""

import collections
import gzip
import json
import sys

records = {}
for line in gzip.open(sys.argv[2], "rt"):
    r = json.loads(line)
    if r.get("model", "").startswith("fuzz:"):
        records[(int(r["model"].split(":")[2]), r["driver"])] = r
moves = collections.Counter()
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["tokens"] or "outcomes" not in r:
        continue
    for d, (status, hvp) in r["outcomes"].items():
        rec = records.get((r["index"], d))
        if rec is None:
            continue
        now_hvp = rec.get("hvp_status")
        now_hvp = None if now_hvp in (None, "None") else now_hvp
        if status != rec["status"]:
            moves[("first order", status, rec["status"])] += 1
        if hvp != now_hvp:
            moves[("H v", str(hvp), str(now_hvp))] += 1
for k, v in sorted(moves.items()):
    print(f"{k[0]:12s} {k[1]:22s} -> {k[2]:22s} {v}")
