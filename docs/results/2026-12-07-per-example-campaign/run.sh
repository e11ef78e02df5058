#!/usr/bin/env bash
# The per_example fuzz campaign of 2026-12-07 (see ../2026-12-07-per-example-campaign.md).
# usage: run.sh SRC OUT   (SRC: a frozen copy of src/, e.g. from `git archive`; OUT: where the records go)
# Each campaign stops at its own 25-minute limit (`timeout`); its records are written as outcomes finish.
set -u
SRC=$1
OUT=$2
PY=${PYTHON:-python}
mkdir -p "$OUT"
common=(--mode per_example --seed 1207 --losses weighted --workers 2)
fuzz() { PYTHONPATH="$SRC" timeout 1500 nice -n 10 "$PY" -m rnnbench fuzz "${common[@]}" "$@"; }
uptime
fuzz --grammar edge --snap-rate 0.25 --cases 300 --drivers torch_loop,jax_loop,jax_lax_scan --shrink 1 \
    --out "$OUT/unplanted-edge-float64.jsonl"
uptime
fuzz --grammar smooth --cases 300 --dtypes float32 --drivers torch_loop,jax_loop,jax_lax_scan,flax_scan --shrink 1 \
    --out "$OUT/unplanted-smooth-float32.jsonl"
uptime
fuzz --grammar smooth --cases 100 --plant per_example:torch --drivers torch_loop,jax_loop --shrink 0 \
    --out "$OUT/planted-torch-float64.jsonl"
uptime
fuzz --grammar smooth --cases 100 --plant per_example:jax --dtypes float32 --drivers jax_lax_scan,torch_loop \
    --shrink 0 --out "$OUT/planted-jax-float32.jsonl"
uptime
