#!/usr/bin/env bash
# torch 2.13.0 (the main environment) against torch 2.14.1 (`rnnbench env create torch-2.14.1`), two rounds,
# the environments' order reversed in the second (the runner runs one driver's rows in both environments
# before the next driver), then compared. Run from the repository root.
set -euo pipefail
out=docs/results/2026-11-26-compare
rows=(--models rnn,lstm --drivers torch_loop,torch_loop_compiled,torch_scan,torch_scan_compiled,torch_nn_rnn,torch_nn_lstm
      --threads 1 --budget 0.5)
cat /proc/loadavg
.venv/bin/rnnbench run --environments main,torch-2.14.1 "${rows[@]}" --out $out/torch-versions-round1.jsonl || true
cat /proc/loadavg
.venv/bin/rnnbench run --environments torch-2.14.1,main "${rows[@]}" --out $out/torch-versions-round2.jsonl || true
cat /proc/loadavg
.venv/bin/rnnbench compare $out/torch-versions-round1.jsonl $out/torch-versions-round2.jsonl \
    --environments torch-2.13.0,torch-2.14.1 > $out/torch-versions-compare.txt || true
.venv/bin/rnnbench compare $out/torch-versions-round1.jsonl $out/torch-versions-round2.jsonl \
    --environments torch-2.13.0,torch-2.14.1 --format markdown > $out/torch-versions-compare.md || true
