"""Mixed precision with an fp32 island (docs/bugs.md §3): the input projection runs in whatever precision
the driver's autocast gives it, the carry update runs inside `ops.fp32_island()` (autocast disabled).

rnn_fp32_island:  u_t = x_t @ W_ih.T                       (B, H)  bf16 under autocast
                  h_t = tanh(float(u_t) + h_{t-1} @ W_hh.T)  (B, H)  fp32 island
                  loss = sum(ys * wy) + sum(h_T * wh)
Canonical parameters: W_ih (H, I), W_hh (H, H); h0 requires grad.

The data make every bf16 operation of the forward exact: xs are multiples of 1/4 in [-1, 1] and
W_ih multiples of 1/32 in [-1/4, 1/4], so each product is a multiple of 1/128 and a row sum of I=8
of them has magnitude <= 2 -- at most 8 significant bits, exactly representable in bfloat16. The
island therefore sees the same numbers as the float64 oracle, and the gradients that flow only
through the island (W_hh, h0) keep float32 accuracy in a correct mixed-precision backward.
Without autocast (every other driver) the model is a plain Elman RNN without bias.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model, time_major_batch
from rnnbench_models._common import rng_for, uniform


def step(ops, params, carry, x_t):
    (h,) = carry
    u = ops.linear(x_t, params["W_ih"])
    with ops.fp32_island():
        h = ops.tanh(ops.cast_like(u, h) + ops.linear(h, params["W_hh"]))
    return (h,), h


def loss(ops, consts, ys, carry):
    return ops.sum(ys * consts["wy"]) + ops.sum(carry[0] * consts["wh"])


def make_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("rnn_fp32_island", seed)
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    if I > 8:
        raise ValueError("rnn_fp32_island needs I <= 8 to keep the bf16 input projection exact")
    return Case(
        model="rnn_fp32_island",
        sizes=dict(sizes),
        seed=seed,
        params={"W_ih": rng.integers(-8, 9, size=(H, I)) / 32.0, "W_hh": uniform(rng, (H, H), 1.0 / np.sqrt(H))},
        carry0=(uniform(rng, (B, H), 0.5),),
        xs=rng.integers(-4, 5, size=(T, B, I)) / 4.0,
        length=T,
        consts={"wy": uniform(rng, (T, B, H)), "wh": uniform(rng, (B, H))},
        carry0_requires_grad=(True,),
    )


def oracle(case: Case) -> dict[str, np.ndarray]:
    """Hand-derived float64 BPTT (no rounding: the float64 semantics of the step)."""
    p, xs, c = case.params, case.xs, case.consts
    W_ih, W_hh = p["W_ih"], p["W_hh"]
    hs = [case.carry0[0]]
    for x in xs:
        hs.append(np.tanh(x @ W_ih.T + hs[-1] @ W_hh.T))
    dW_ih, dW_hh = np.zeros_like(W_ih), np.zeros_like(W_hh)
    dh = c["wh"].copy()
    for t in range(case.length - 1, -1, -1):
        dh = dh + c["wy"][t]
        dz = dh * (1.0 - hs[t + 1] ** 2)
        dW_ih += dz.T @ xs[t]
        dW_hh += dz.T @ hs[t]
        dh = dz @ W_hh
    return {"W_ih": dW_ih, "W_hh": dW_hh, "carry0.h": dh}


MODELS = (
    Model(
        name="rnn_fp32_island",
        suite="bugs",
        summary="Elman RNN, input projection in autocast precision, carry update in an fp32 island (docs/bugs.md §3)",
        carry_names=("h",),
        default_sizes={"T": 8, "B": 4, "I": 8, "H": 16},
        make_case=make_case,
        step=step,
        loss=loss,
        oracle=oracle,
        oracle_kind="hand_bptt",
        cotangent_consts=lambda dys, dcarry: {"wy": dys, "wh": dcarry[0]},
        island_grads=("W_hh", "carry0.h"),
        batch_axes=time_major_batch(("h",), step_consts=("wy",), leaf_consts=("wh",)),
    ),
)
