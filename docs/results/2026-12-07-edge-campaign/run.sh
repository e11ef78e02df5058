#!/bin/sh
# The campaigns of issue 49's edge campaign, two chains at once on a 2-core machine (as
# ../2026-11-28-edge-campaign-1000/campaign.sh):
#   (a) the edge grammar, the 2026-11-28 campaign's bodies (seed 1128, snap rate 0.25), so its undecided
#       counts compare directly: N bodies at float64 (first order and H v) and N at float32;
#   (b) the edge2 grammar (issue 49's classes: a layer of ReLU units dead together, ties equal to first
#       order, stable forms with max and abs; docs/fuzzing.md), N bodies per dtype;
#   planted, on edge2: --plant grad:torch (float64 and float32) and --plant hvp:jax (float64), P bodies each.
# Drivers: torch_loop, jax_loop, jax_lax_scan (torch_scan left out as on 2026-11-28: it costs most and its
# first order was torch_loop's on every body).
# Usage: run.sh FROZEN_SRC [OUT [N [P]]]: FROZEN_SRC the src/ of a `git archive` of the commit measured;
# OUT the folder for records and consoles (default: beside this script); N default 1000, P default 100.
# The pilot: run.sh FROZEN_SRC PILOT_OUT 10 10.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$here} n=${3:-1000} p=${4:-100}
mkdir -p "$out"
round=$(( n < 250 ? n : 250 ))
export RNNBENCH="env PYTHONPATH=$1 OMP_NUM_THREADS=1 ${PYTHON:-python} -m rnnbench"
COMMON="--snap-rate 0.25 --seed 1128 --losses weighted --workers 2"
DRIVERS="torch_loop,jax_loop,jax_lax_scan"
(
    "$here/rounds.sh" "$out" edge-float64 "$n" "$round" --grammar edge $COMMON --drivers $DRIVERS --dtypes float64
    "$here/rounds.sh" "$out" edge2-float64 "$n" "$round" --grammar edge2 $COMMON --drivers $DRIVERS --dtypes float64
) &
(
    "$here/rounds.sh" "$out" edge-float32 "$n" "$round" --grammar edge $COMMON --drivers $DRIVERS --dtypes float32
    "$here/rounds.sh" "$out" edge2-float32 "$n" "$round" --grammar edge2 $COMMON --drivers $DRIVERS --dtypes float32
    "$here/rounds.sh" "$out" edge2-planted-grad-torch "$p" "$p" --grammar edge2 $COMMON --plant grad:torch \
        --drivers $DRIVERS --dtypes float64,float32
    "$here/rounds.sh" "$out" edge2-planted-hvp-jax "$p" "$p" --grammar edge2 $COMMON --plant hvp:jax \
        --drivers $DRIVERS --dtypes float64
) &
wait
