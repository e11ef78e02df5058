"""Compare two equivalence runs of run.sh: each row's verdict and the set of field paths records hold.

Usage: compare.py BEFORE AFTER FILE... (FILE: run.jsonl.gz, fuzz3.jsonl.gz, fuzz11.jsonl.gz). A row is
its identity fields; its verdict is every status, the oracle's kind, each gradient entry's verdict and
value, and the report with the checkout's path taken out (a traceback names the file it ran from)."""

import gzip
import json
import re
import sys
from pathlib import Path

IDENTITY = ("model", "driver", "dtype", "loss_form", "sizes", "seed", "case", "environment_name")
VERDICT = ("status", "raw_status", "hvp_status", "oracle_kind", "grad_errors", "max_rel_error", "reason")


def paths(value, prefix=""):
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(prefix + k)
            out |= paths(v, prefix + k + ".")
    return out


def load(path: Path) -> list[dict]:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def key(rec: dict) -> str:
    return json.dumps({k: rec.get(k) for k in IDENTITY}, sort_keys=True)


def verdict(rec: dict) -> str:
    out = {k: rec.get(k) for k in VERDICT}
    out["hvp"] = (rec.get("hvp") or {}).get("status")
    out["report"] = re.sub(r"/\S+/src/rnnbench/", "<src>/rnnbench/", rec.get("report") or "")
    return json.dumps(out, sort_keys=True)


def main(before: str, after: str, names: list[str]) -> int:
    differences = 0
    for name in names:
        a, b = load(Path(before) / name), load(Path(after) / name)
        pa, pb = set().union(*map(paths, a)), set().union(*map(paths, b))
        print(f"{name}: {len(a)} vs {len(b)} records; field paths only before {sorted(pa - pb)},", end=" ")
        print(f"only after {sorted(pb - pa)}")
        va, vb = {key(r): verdict(r) for r in a}, {key(r): verdict(r) for r in b}
        differ = [k for k in va if va[k] != vb.get(k)]
        print(f"  {len(va)} rows; verdicts that differ: {len(differ)}")
        for k in differ:
            print(f"    {k}\n      before {va[k][:400]}\n      after  {(vb.get(k) or 'MISSING')[:400]}")
        differences += len(differ) + (len(a) != len(b))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
