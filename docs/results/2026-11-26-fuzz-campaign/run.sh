#!/usr/bin/env bash
# The fuzz campaign of docs/results/2026-11-26-fuzz-campaign.md: seed 2026, default drivers and loss
# forms, float64 and float32 in two processes (one per dtype, each its own results file). The number
# of bodies grows in rounds resumed on the same file, so wherever it is stopped every driver has
# judged the same prefix of bodies. Run from the repository root.
set -u
# The code under test: PYTHONPATH may point at a frozen copy of a commit (the campaign ran on one).
DTYPE=$1
OUT=docs/results/2026-11-26-fuzz-campaign/fuzz-$DTYPE.jsonl
LOG=docs/results/2026-11-26-fuzz-campaign/console-$DTYPE.txt
for CASES in 10 25 50 100 200 400 700 1000; do
  RESUME=""; [ -f "$OUT" ] && RESUME="--resume"
  { echo "== $(date -u +%FT%TZ) rnnbench fuzz --cases $CASES --seed 2026 --dtypes $DTYPE --out $OUT $RESUME; load $(cut -d' ' -f1-3 /proc/loadavg)";
    .venv/bin/rnnbench fuzz --cases "$CASES" --seed 2026 --dtypes "$DTYPE" --out "$OUT" $RESUME 2>&1 | tr '\r' '\n' | grep -v '^.*: case [0-9]*/[0-9]* ([0-9]* s) *$';
    echo "== $(date -u +%FT%TZ) done --cases $CASES; load $(cut -d' ' -f1-3 /proc/loadavg)"; } >> "$LOG"
done
