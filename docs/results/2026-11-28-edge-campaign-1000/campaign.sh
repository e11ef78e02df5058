#!/bin/sh
# The campaigns of docs/results/2026-11-28-edge-campaign-1000.md, two chains at once on the 2-core
# machine: float64 (first order and H v) alone; float32, then the three planted campaigns.
# Usage: campaign.sh FROZEN_SRC (the src/ of a `git archive` of the commit measured).
set -u
here=$(cd "$(dirname "$0")" && pwd)
export RNNBENCH="env PYTHONPATH=$1 OMP_NUM_THREADS=1 ${PYTHON:-python} -m rnnbench"
COMMON="--grammar edge --snap-rate 0.25 --seed 1128 --losses weighted --workers 2"
FOUR="torch_loop,torch_scan,jax_loop,jax_lax_scan"
"$here/run.sh" float64 1000 250 $COMMON --drivers ${DRIVERS64:-$FOUR} --dtypes float64 &
(
    "$here/run.sh" float32 1000 250 $COMMON --drivers ${DRIVERS32:-$FOUR} --dtypes float32
    "$here/run.sh" planted-grad-torch 100 100 $COMMON --plant grad:torch --drivers torch_loop,torch_scan,jax_loop \
        --dtypes float64,float32
    "$here/run.sh" planted-hvp-jax 100 100 $COMMON --plant hvp:jax --drivers jax_loop,jax_lax_scan,torch_loop \
        --dtypes float64
) &
wait
