"""The pilot's summary: per row, the 10th percentile of CPU times of every process, raw and relative to
each reference variant (a: one recurrence right after the call; b: four, timed together, over 4; c:
one untimed, then one timed): max/min and cv over the processes, and the correlation with the row.
Run in this folder: python summary.py"""

import collections
import glob
import json

import numpy as np

runs = collections.defaultdict(list)
for f in glob.glob("out/*.json"):
    d, t, i = f.split("/")[-1][:-5].rsplit("-", 2)
    r = json.load(open(f))
    q = {k: np.quantile(v, 0.1) for k, v in r.items()}
    runs[(d, t)].append(q)
for k, qs in sorted(runs.items()):
    row = np.array([q["row"] for q in qs])
    line = f"{k} n={len(qs)} raw max/min {row.max() / row.min():.3f} cv {row.std() / row.mean():.3f}"
    for v in "abc":
        ref = np.array([q[v] for q in qs])
        rel = row / ref
        line += (
            f" | {v}: ref {ref.mean() * 1e3:.4f}ms refspread {ref.max() / ref.min():.3f}"
            f" rel max/min {rel.max() / rel.min():.3f} cv {rel.std() / rel.mean():.3f}"
            f" corr {np.corrcoef(row, ref)[0, 1]:.2f}"
        )
    print(line)
