#!/usr/bin/env bash
# The per-mode speed study of 2026-12-08 (docs/results/2026-12-08-mode-speed.md): rnn and lstm at the
# realistic suite's T=128, B=32 and its smaller I=H=256, float32, one thread per row, every road of a row
# interleaved in one timed loop (--roads). vjp rows time one seeded JVP (torch.func.jvp / jax.jvp, and
# torch.autograd.forward_ad) beside their backward; per_example rows time vmap of grad, a loop over the
# examples, the batched-loss trick and the batch's vjp. jvp rows are not run at these sizes: their check
# is the gradient column by column (140k+ forward passes); the JVP is held to the vjp row's checked gradient.
set -euo pipefail
out=${1:-docs/results/2026-12-08-mode-speed}
uptime | tee "$out/uptime-start.txt"
OPENBLAS_NUM_THREADS=1 nice -n 10 rnnbench run --suite realistic --models rnn,lstm \
    --sizes T=128,B=32,I=256,H=256 --dtypes float32 --threads 1 --modes vjp,per_example --roads \
    --drivers torch_loop,torch_nn_rnn,torch_nn_lstm,jax_lax_scan,flax_scan,flax_simple_cell,flax_lstm_cell \
    --timeout 1800 --out "$out/raw.jsonl"
uptime | tee "$out/uptime-middle.txt"
# the compiled torch loop, rnn only: every road is its own inductor compile of the unrolled T=128 program
OPENBLAS_NUM_THREADS=1 nice -n 10 rnnbench run --suite realistic --models rnn \
    --sizes T=128,B=32,I=256,H=256 --dtypes float32 --threads 1 --modes vjp,per_example --roads \
    --drivers torch_loop_compiled --compile-budget 600 --timeout 3000 --out "$out/raw-compiled.jsonl"
uptime | tee "$out/uptime-end.txt"
