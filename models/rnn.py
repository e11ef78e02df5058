"""Elman RNN with tanh, input projection hoisted out of the loop.

xp = xs @ W_ih.T + b                      (T, B, H), one matmul for all steps
h_t = tanh(xp_t + h_{t-1} @ W_hh.T)       (B, H)
loss = sum(ys * wy) + sum(h_T * wh)       wy: (T, B, H), wh: (B, H) fixed random weights
Canonical parameters: W_ih (H, I), W_hh (H, H), b (H). h0 does not require grad.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model, time_major_batch
from rnnbench_models._common import rng_for, uniform
from rnnbench_models._flops import count


def prologue(ops, params, xs):
    return ops.linear(xs, params["W_ih"], params["b"])


def step(ops, params, carry, xp_t):
    (h,) = carry
    h = ops.tanh(ops.linear(h, params["W_hh"], xp_t))  # xp_t + h @ W_hh.T, fused (torch: one addmm)
    return (h,), h


def loss(ops, consts, ys, carry):
    return ops.sum(ys * consts["wy"]) + ops.sum(carry[0] * consts["wh"])


def make_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("rnn", seed)
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    k = 1.0 / np.sqrt(H)  # torch.nn.RNN's default init range
    return Case(
        model="rnn",
        sizes=dict(sizes),
        seed=seed,
        params={"W_ih": uniform(rng, (H, I), k), "W_hh": uniform(rng, (H, H), k), "b": uniform(rng, (H,), k)},
        carry0=(uniform(rng, (B, H), 0.5),),
        xs=uniform(rng, (T, B, I)),
        length=T,
        consts={"wy": uniform(rng, (T, B, H)), "wh": uniform(rng, (B, H))},
        carry0_requires_grad=(False,),
    )


def bptt(
    W_ih: np.ndarray, W_hh: np.ndarray, b: np.ndarray, xs: np.ndarray, h0: np.ndarray, dys: np.ndarray, dhT: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Hand-derived float64 BPTT of one Elman layer for given output cotangents.

    xs (T, B, I), h0 (B, H); dys (T, B, H) = d loss / d ys, dhT (B, H) = d loss / d h_T.
    Returns ({"W_ih", "W_hh", "b"}, dxs (T, B, I), dh0 (B, H))."""
    hs = [h0]
    for x in xs:
        hs.append(np.tanh(x @ W_ih.T + b + hs[-1] @ W_hh.T))
    dW_ih, dW_hh, db, dxs = np.zeros_like(W_ih), np.zeros_like(W_hh), np.zeros_like(b), np.zeros_like(xs)
    dh = np.array(dhT, dtype=np.float64)
    for t in range(len(xs) - 1, -1, -1):
        dh = dh + dys[t]
        dz = dh * (1.0 - hs[t + 1] ** 2)  # (B, H)
        dW_ih += dz.T @ xs[t]
        dW_hh += dz.T @ hs[t]
        db += dz.sum(axis=0)
        dxs[t] = dz @ W_ih
        dh = dz @ W_hh
    return {"W_ih": dW_ih, "W_hh": dW_hh, "b": db}, dxs, dh


def outputs(W_ih: np.ndarray, W_hh: np.ndarray, b: np.ndarray, xs: np.ndarray, h0: np.ndarray) -> np.ndarray:
    """ys (T, B, H) of one Elman layer, float64 numpy (for oracles of models built from layers)."""
    hs, h = [], h0
    for x in xs:
        h = np.tanh(x @ W_ih.T + b + h @ W_hh.T)
        hs.append(h)
    return np.stack(hs)


def oracle(case: Case) -> dict[str, np.ndarray]:
    """Hand-derived float64 BPTT."""
    p, c = case.params, case.consts
    grads, _, dh0 = bptt(p["W_ih"], p["W_hh"], p["b"], case.xs, case.carry0[0], c["wy"], c["wh"])
    if case.carry0_requires_grad and case.carry0_requires_grad[0]:
        grads["carry0.h"] = dh0
    return grads


def flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Projection 2TBIH, recurrence 2TBH^2 forward. Backward: dW_ih (xs needs no grad), dW_hh, and
    dh through T-1 steps (h0 needs no grad). Elementwise: bias, add, tanh, then loss 2TBH + 2BH."""
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    return count(
        2 * T * B * I * H + 2 * T * B * H * H,
        2 * T * B * I * H + 2 * (2 * T - 1) * B * H * H,
        5 * T * B * H + 2 * B * H,
    )


MODELS = (
    Model(
        name="rnn",
        summary="Elman RNN, tanh, hoisted input projection",
        carry_names=("h",),
        default_sizes={"T": 16, "B": 4, "I": 8, "H": 16},
        make_case=make_case,
        step=step,
        loss=loss,
        prologue=prologue,
        oracle=oracle,
        oracle_kind="hand_bptt",
        cotangent_consts=lambda dys, dcarry: {"wy": dys, "wh": dcarry[0]},
        kind="elman_tanh",
        flops=flops,
        batch_axes=time_major_batch(("h",), step_consts=("wy",), leaf_consts=("wh",)),
    ),
)
