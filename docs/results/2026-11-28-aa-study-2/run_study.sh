#!/usr/bin/env bash
# The second A/A study (docs/results/2026-11-28-aa-study-2.md), the first study's design
# (../2026-11-28-aa-study/run_study.sh) with more pairs: pairs of runs of one tree, the new side of
# each pair with the aa_planted row's calls run twice (PLANTED_SLOWDOWN=2). "loaded" pairs run beside
# two busy loops at nice 0 (one per core); "unplanted" pairs beside whatever else the machine runs.
# Each run: 3 rows (rnn: torch_loop, aa_planted, jax_lax_scan), one thread each, nice 10; 4 lanes.
# "thrashed" pairs (none by default) run beside the two busy loops and two processes streaming over
# 128 MiB each (nice 0): other work that also takes the caches and the memory bandwidth.
# Usage: run_study.sh TREE OUT PYTHON [LOADED_PAIRS [UNPLANTED_PAIRS [THRASHED_PAIRS]]]   (TREE: a copy of
# src/rnnbench, models as rnnbench_models, docs/upstream as rnnbench_upstream, and the first study's
# rnnbench_aa_planted.py; OUT: where the records and the log go)
set -u
TREE=$1 OUT=$2 PY=$3 LOADED=${4:-20} UNPLANTED=${5:-10} THRASHED=${6:-0}
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
lane() {  # condition lane lanes pairs: every lanes-th pair from lane, each base then new
  for ((i = $2; i <= $4; i += $3)); do one_run "$1" "$i" base 1; one_run "$1" "$i" new 2; done
}
phase() {  # condition pairs: the pairs in 4 lanes at once
  local lanes=()
  for l in 1 2 3 4; do lane "$1" "$l" 4 "$2" & lanes+=($!); done
  wait "${lanes[@]}"
}
# Loaded: two busy loops at nice 0 (one per core) for the whole phase.
busy=()
for _ in 1 2; do nice -n 0 "$PY" -c "while True: pass" & busy+=($!); done
phase loaded "$LOADED"
for pid in "${busy[@]}"; do kill "$pid"; done
# Unplanted: the same without the busy loops.
phase unplanted "$UNPLANTED"
# Thrashed: two busy loops and two memory-streaming loops for the whole phase.
if ((THRASHED > 0)); then
  busy=()
  for _ in 1 2; do
    nice -n 0 "$PY" -c "while True: pass" & busy+=($!)
    nice -n 0 "$PY" -c "import numpy as np; a = np.ones(2**24)
while True: a += 1" & busy+=($!)
  done
  phase thrashed "$THRASHED"
  for pid in "${busy[@]}"; do kill "$pid"; done
fi
echo "$(date -u +%H:%M:%S) done" >> "$OUT/log.txt"
