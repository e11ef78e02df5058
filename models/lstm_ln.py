"""LayerNorm-LSTM: the LSTM of models/lstm.py with a LayerNorm on each gate's pre-activation, its gains
and biases chunk()ed from ONE parameter tensor.

xp = xs @ W_ih.T + b                                    (T, B, 4H)
z_i, z_f, z_g, z_o = split(xp_t + h @ W_hh.T, 4)        each (B, H)
g_i, g_f, g_g, g_o, s_i, s_f, s_g, s_o = split(ln, 8)   each (H,): views of one parameter
q = LN(z_q) * g_q + s_q,  LN(z) = (z - mean(z)) / sqrt(var(z) + eps)   (mean, var over H)
c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
loss = sum(ys * wy) + sum(h_T * wh) + sum(c_T * wc)
Canonical parameters: W_ih (4H, I), W_hh (4H, H), b (4H), ln (8H). (h0, c0) require grad.

Why one `ln` tensor: the gradient of each chunk is a column reduction (over the batch) written into
a view of the one gradient buffer, the shape of pytorch#193061 (inductor's mix-order reduction
rebinds a fused reduction's output instead of writing the view: the chunks' gradients are never
written). Inductor fuses a row reduction (LayerNorm's, over H) with such a column reduction only on
GPU Triton and only past MIX_ORDER_PROBE's sizes (docs/bugs.md, verdicts). The oracle is the oracle
ladder's dual numbers over this same step: no autodiff engine is shared with any driver.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model, time_major_batch
from rnnbench_models import lstm
from rnnbench_models._common import rng_for, uniform
from rnnbench_models._flops import count

EPS = 1e-5  # torch.nn.LayerNorm's default

# The smallest sizes at which inductor's scheduler fuses a LayerNorm's row reduction (B rows of H)
# with its gain's column reduction (torch/_inductor/scheduler.py, MixOrderReduction.can_fuse, in
# non-strict mode off): rows * cols >= 5 * 2**20, rows >= 2 * cols, rows >= 4096, cols <= 16384.
# Rows are the batch B (one gate's (B, H) slice), cols H.
MIX_ORDER_PROBE = {"T": 4, "B": 8192, "I": 64, "H": 1024}


def layer_norm(ops, z, gain, shift):
    """LayerNorm over the last axis of z (..., H) with gain and shift (H,)."""
    centered = z - ops.mean(z)
    return centered / ops.sqrt(ops.mean(centered * centered) + EPS) * gain + shift


def step(ops, params, carry, xp_t):
    h, c = carry
    z = ops.split(ops.linear(h, params["W_hh"], xp_t), 4)
    ln = ops.split(params["ln"], 8)  # torch: chunk(), eight views of one tensor
    i, f, g, o = (layer_norm(ops, z[q], ln[q], ln[4 + q]) for q in range(4))
    c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
    h = ops.sigmoid(o) * ops.tanh(c)
    return (h, c), h


def make_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("lstm_ln", seed)
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    k = 1.0 / np.sqrt(H)
    gains, shifts = 1.0 + uniform(rng, (4 * H,), 0.2), uniform(rng, (4 * H,), 0.2)  # near LayerNorm's init
    return Case(
        model="lstm_ln",
        sizes=dict(sizes),
        seed=seed,
        params={
            "W_ih": uniform(rng, (4 * H, I), k),
            "W_hh": uniform(rng, (4 * H, H), k),
            "b": uniform(rng, (4 * H,), k),
            "ln": np.concatenate([gains, shifts]),
        },
        carry0=(uniform(rng, (B, H), 0.5), uniform(rng, (B, H), 0.5)),
        xs=uniform(rng, (T, B, I)),
        length=T,
        consts={"wy": uniform(rng, (T, B, H)), "wh": uniform(rng, (B, H)), "wc": uniform(rng, (B, H))},
        carry0_requires_grad=(True, True),
    )


def flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """The LSTM's count (models/lstm.py) plus four LayerNorms a step: per entry mean, centre, square,
    mean, add eps, sqrt, divide, gain, shift: 9 BH per gate, 36 BH a step."""
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    proj, rec = 2 * T * B * I * 4 * H, 2 * T * B * H * 4 * H
    return count(proj + rec, proj + 2 * rec, (17 + 36) * T * B * H + 2 * T * B * H + 4 * B * H)


MODELS = (
    Model(
        name="lstm_ln",
        summary="LayerNorm-LSTM: per-gate LayerNorm, gains and shifts chunk()ed from one parameter",
        carry_names=("h", "c"),
        default_sizes={"T": 8, "B": 4, "I": 8, "H": 16},
        make_case=make_case,
        step=step,
        loss=lstm.loss,
        prologue=lstm.prologue,
        cotangent_consts=lambda dys, dcarry: {"wy": dys, "wh": dcarry[0], "wc": dcarry[1]},
        oracle_kind="dual",  # the oracle ladder: dual numbers over this step
        kind="lstm_layernorm",
        flops=flops,
        batch_axes=time_major_batch(("h", "c"), step_consts=("wy",), leaf_consts=("wh", "wc")),
    ),
)
