#!/usr/bin/env bash
# The reference-kernel pilot (docs/results/2026-11-28-aa-study-2.md#the-kernel): 12 processes of each of
# torch_loop, torch_loop with each call run twice, and jax_lax_scan, one thread, 2 lanes, beside the
# first study's thrashed load (run during it). Usage (in this folder): run.sh TREE PYTHON
set -u
TREE=$1 PY=$2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=$TREE
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
lane() { for i in $(seq "$1" "$2"); do for d in "torch_loop 1" "torch_loop 2" "jax_lax_scan 1"; do set -- $d
  nice -n 10 taskset -c $((i % 2)) "$PY" variants.py "$1" "$2" "out/$1-$2-$i.json"; done; done; }
echo "start $(date -u +%T) $(uptime)" > log.txt
lane 1 6 & lane 7 12 & wait
echo "done $(date -u +%T) $(uptime)" >> log.txt
