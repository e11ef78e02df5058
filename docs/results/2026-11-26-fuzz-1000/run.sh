#!/usr/bin/env bash
# The 1000-body fuzz campaign of docs/results/2026-11-26-fuzz-1000.md: seed 2027, default drivers and loss
# forms, one process per dtype (float64 with second order, float32), each its own results file, run at
# the same time with 2 drivers at once each. Bodies grow in rounds resumed on the same file, so wherever
# it stops every driver has judged the same prefix of bodies. Run from the repository root.
set -u
# The code under test: PYTHONPATH may point at a frozen copy of a commit (the campaign ran on one).
DTYPE=$1
HERE=docs/results/2026-11-26-fuzz-1000
OUT=$HERE/fuzz-$DTYPE.jsonl
LOG=$HERE/console-$DTYPE.txt
for CASES in 250 500 1000; do
  RESUME=""; [ -f "$OUT" ] && RESUME="--resume"
  { echo "== $(date -u +%FT%TZ) rnnbench fuzz --cases $CASES --seed 2027 --dtypes $DTYPE --workers 2 --out $OUT $RESUME; load $(cut -d' ' -f1-3 /proc/loadavg)";
    /usr/bin/time -f "wall %e s, user %U s, sys %S s" .venv/bin/rnnbench fuzz --cases "$CASES" --seed 2027 --dtypes "$DTYPE" --workers 2 --out "$OUT" $RESUME 2>&1 | tr '\r' '\n' | grep -v '^.*: case [0-9]*/[0-9]* ([0-9]* s) *$';
    echo "== $(date -u +%FT%TZ) done --cases $CASES; load $(cut -d' ' -f1-3 /proc/loadavg)"; } >> "$LOG"
done
