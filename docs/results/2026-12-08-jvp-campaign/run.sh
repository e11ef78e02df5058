#!/usr/bin/env bash
# The jvp fuzz campaign of 2026-12-08 (see ../2026-12-08-jvp-campaign.md), and the per_example mode's third
# planted set (its first two: ../2026-12-07-per-example-campaign).
# usage: run.sh SRC OUT   (SRC: a frozen copy of src/, e.g. from `git archive`; OUT: where the records go)
# Each campaign stops at its own 25-minute limit (`timeout`); its records are written as outcomes finish.
set -u
SRC=$1
OUT=$2
PY=${PYTHON:-python}
mkdir -p "$OUT"
common=(--seed 1208 --losses weighted --workers 2)
fuzz() { PYTHONPATH="$SRC" timeout 1500 nice -n 10 "$PY" -m rnnbench fuzz "${common[@]}" "$@"; }
uptime
fuzz --mode jvp --grammar edge --snap-rate 0.25 --cases 300 --drivers torch_loop,torch_scan,jax_loop,jax_lax_scan \
    --shrink 1 --out "$OUT/unplanted-edge-float64.jsonl"
uptime
fuzz --mode jvp --grammar smooth --cases 300 --dtypes float32 --drivers torch_loop,torch_scan,jax_loop,jax_lax_scan,flax_scan \
    --shrink 1 --out "$OUT/unplanted-smooth-float32.jsonl"
uptime
fuzz --mode jvp --grammar smooth --cases 150 --plant jvp:torch --drivers torch_loop,jax_loop --shrink 0 \
    --out "$OUT/planted-torch-float64.jsonl"
uptime
fuzz --mode jvp --grammar smooth --cases 150 --plant jvp:jax --dtypes float32 --drivers jax_lax_scan,torch_loop \
    --shrink 0 --out "$OUT/planted-jax-float32.jsonl"
uptime
fuzz --mode per_example --grammar edge --snap-rate 0.25 --cases 100 --plant per_example:torch --dtypes float32 \
    --drivers torch_loop,jax_lax_scan --shrink 0 --out "$OUT/per-example-planted-torch-float32.jsonl"
uptime
