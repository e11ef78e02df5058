#!<path>/env bash
# The cachegrind measurement (docs/results/2026-11-28-cachegrind.md): one curated row (rnn T=8 B=8
# I=16 H=32, torch_loop, forward+backward, float32, one thread), native and under cachegrind, N=0
# and N=200 calls after 3 warm-up calls, RUNS times; HASHSEED (optional) fixes PYTHONHASHSEED.
# Usage: run.sh TREE PYTHON RUNS [HASHSEED]   (TREE: src/rnnbench, models as rnnbench_models; run here)
set -u
TREE=$1 PY=$2 RUNS=$3 SEED=${4:-}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=$TREE
tag=""
if [[ -n $SEED ]]; then export PYTHONHASHSEED=$SEED; tag="h$SEED."; fi
for i in $(seq 1 "$RUNS"); do
  if [[ -z $SEED ]]; then
    echo "$(date -u +%T) native $i $(uptime)" >> log.txt
    nice -n 10 "$PY" count_row.py 200 > "native.$i.out" 2>&1
  fi
  for n in 0 200; do
    echo "$(date -u +%T) ${SEED:+hashseed$SEED }cachegrind N=$n run $i start $(uptime)" >> log.txt
    <path>/time -f "%e s wall %U s user" nice -n 10 valgrind --tool=cachegrind --cache-sim=no \
      --cachegrind-out-file=/dev/null "$PY" count_row.py $n > "cg.${tag}n$n.run$i.out" 2>&1
  done
done
echo "$(date -u +%T) ${SEED:+hashseed$SEED }done $(uptime)" >> log.txt
