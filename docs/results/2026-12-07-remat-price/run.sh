#!/bin/bash
# The commands of docs/results/2026-12-07-remat-price.md, as they were run (2026-12-07, 20:25-21:28 UTC),
# from the checkout, one after another (nothing else of this session ran beside them). Records go to
# $OUT (default: a new temporary directory); the published files are these, less the first two runs'
# torch_scan / torch_scan_checkpoint rows (see the page), with paths scrubbed
# (python -m rnnbench.report.scrub IN OUT).
set -eu
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$(mktemp -d)}
export OPENBLAS_NUM_THREADS=1  # the float64 oracle's BLAS on one thread (docs/results/2026-11-26-realistic.md)
SIZES=B=32,I=256,H=256  # the realistic suite's smaller width (rnnbench.suites.REALISTIC)
ALL=jax_lax_scan,jax_lax_scan_remat_nothing,jax_lax_scan_remat_dots,jax_lax_scan_remat3_nothing,jax_lax_scan_remat3_dots
ALL=$ALL,torch_loop,torch_loop_checkpoint,torch_scan,torch_scan_checkpoint,torch_scan_compiled,torch_scan_checkpoint_compiled
run() { nice -n 10 rnnbench run --environments main --dtypes float32 --threads 1 "$@"; }

# 1. every pair at T=64 and 256; at T=1024 interrupted (SIGINT) once torch_loop_checkpoint's rows were written
for T in 64 256 1024; do
    run --models lstm,rnn --drivers $ALL --sizes T=$T,$SIZES --out "$OUT/T$T.jsonl"
done
# 2. the eager torch scan pair again, after its step-memory count was fixed (commit e1c45965), and the
#    compiled pair at T=1024
for T in 64 256; do
    run --models lstm,rnn --drivers torch_scan,torch_scan_checkpoint --sizes T=$T,$SIZES --out "$OUT/scan-T$T.jsonl"
done
run --models lstm,rnn --drivers torch_scan,torch_scan_checkpoint,torch_scan_compiled,torch_scan_checkpoint_compiled \
    --sizes T=1024,$SIZES --out "$OUT/scan-T1024.jsonl"
# 3. T=4096: the one pair that fits a few minutes here
run --models rnn --drivers jax_lax_scan,jax_lax_scan_remat_nothing --sizes T=4096,$SIZES --out "$OUT/T4096-rnn.jsonl"

# the chart and page (from the published records): docs/charts.toml
rnnbench report docs/results/2026-12-07-remat-price/*.jsonl --out-dir docs/results/2026-12-07-remat-price/report
python docs/results/2026-12-07-remat-price/prices.py
