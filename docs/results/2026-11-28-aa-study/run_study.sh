#!/usr/bin/env bash
# The A/A study (docs/results/2026-11-28-aa-study.md): pairs of runs of one tree, the new side of each
# pair with the aa_planted row's calls run twice (PLANTED_SLOWDOWN=2). "loaded" pairs run beside two
# busy loops at nice 0 (one per core); "unplanted" pairs beside whatever else the machine runs.
# Each run: 3 rows (rnn: torch_loop, aa_planted, jax_lax_scan), one thread each, nice 10.
# Usage: run_study.sh TREE OUT PYTHON   (TREE: a copy of src/rnnbench, models as rnnbench_models, and
# this folder's rnnbench_aa_planted.py; OUT: where the records and the log go)
set -u
TREE=$1 OUT=$2 PY=$3
mkdir -p "$OUT"
ROWS=(--models rnn --drivers torch_loop,aa_planted,jax_lax_scan --environments main
      --sizes T=8,B=8,I=16,H=32 --budget 0.3 --threads 1)
one_run() {  # condition pair side planted
  local file="$OUT/$1-$2-$3.jsonl"
  echo "$(date -u +%H:%M:%S) $1 pair $2 $3 start: $(uptime)" >> "$OUT/log.txt"
  PYTHONPATH=$TREE RNNBENCH_PLUGINS=rnnbench_aa_planted PLANTED_SLOWDOWN=$4 \
    nice -n 10 "$PY" -m rnnbench run "${ROWS[@]}" --out "$file" > "$file.console" 2>&1
  echo "$(date -u +%H:%M:%S) $1 pair $2 $3 end (exit $?): $(uptime)" >> "$OUT/log.txt"
}
lane() {  # condition first-pair last-pair: its pairs one after another, each base then new
  for i in $(seq "$2" "$3"); do one_run "$1" "$i" base 1; one_run "$1" "$i" new 2; done
}
# Loaded: two busy loops at nice 0 (one per core) for the whole phase; the 10 pairs in 4 lanes at once
# (the machine's other work left each run a small share of a core: one lane would not finish in time).
busy=()
for _ in 1 2; do nice -n 0 "$PY" -c "while True: pass" & busy+=($!); done
lanes=()
for range in "1 3" "4 6" "7 8" "9 10"; do lane loaded $range & lanes+=($!); done
wait "${lanes[@]}"
for pid in "${busy[@]}"; do kill "$pid"; done
# Unplanted: the same without the busy loops, 4 pairs in 4 lanes.
lane unplanted 1 1 & lane unplanted 2 2 & lane unplanted 3 3 & lane unplanted 4 4 &
wait
echo "$(date -u +%H:%M:%S) done" >> "$OUT/log.txt"
