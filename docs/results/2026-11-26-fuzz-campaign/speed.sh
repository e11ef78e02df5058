#!/usr/bin/env bash
# Before/after of `rnnbench fuzz` (default drivers, loss forms, float64, second order), interleaved:
# BEFORE and AFTER are PYTHONPATH entries holding frozen copies of the two commits (rnnbench and
# rnnbench_models); CASES bodies per run, ROUNDS rounds. Prints one line per run.
set -u
BEFORE=$1; AFTER=$2; CASES=${3:-10}; ROUNDS=${4:-2}; TMP=${TMPDIR:-/tmp}
for round in $(seq 1 "$ROUNDS"); do
  for which in before after; do
    path=$BEFORE; [ "$which" = after ] && path=$AFTER
    out=$TMP/speed-$which-$round.jsonl; rm -f "$out"
    l0=$(cut -d' ' -f1-3 /proc/loadavg); t0=$(date +%s.%N)
    PYTHONPATH=$path .venv/bin/rnnbench fuzz --cases "$CASES" --out "$out" > "$TMP/speed-$which-$round.txt" 2>&1
    rc=$?; t1=$(date +%s.%N)
    echo "round $round $which: $(echo "$t1 - $t0" | bc) s (exit $rc; load before $l0, after $(cut -d' ' -f1-3 /proc/loadavg)); $(grep -c . "$out") records"
  done
done
