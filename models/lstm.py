"""LSTM with standard gates (order i, f, g, o as in torch.nn.LSTM), input projection hoisted.

xp = xs @ W_ih.T + b                                   (T, B, 4H)
i, f, g, o = split(xp_t + h @ W_hh.T, 4)               each (B, H)
c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
loss = sum(ys * wy) + sum(h_T * wh) + sum(c_T * wc)
Canonical parameters: W_ih (4H, I), W_hh (4H, H), b (4H). (h0, c0) require grad (a pytree carry
whose initial value is trainable, the other side of docs/bugs.md §1).
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
    h, c = carry
    i, f, g, o = ops.split(ops.linear(h, params["W_hh"], xp_t), 4)  # xp_t + h @ W_hh.T, fused (torch: one addmm)
    c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
    h = ops.sigmoid(o) * ops.tanh(c)
    return (h, c), h


def loss(ops, consts, ys, carry):
    h, c = carry
    return ops.sum(ys * consts["wy"]) + ops.sum(h * consts["wh"]) + ops.sum(c * consts["wc"])


def make_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("lstm", seed)
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    k = 1.0 / np.sqrt(H)
    return Case(
        model="lstm",
        sizes=dict(sizes),
        seed=seed,
        params={
            "W_ih": uniform(rng, (4 * H, I), k),
            "W_hh": uniform(rng, (4 * H, H), k),
            "b": uniform(rng, (4 * H,), k),
        },
        carry0=(uniform(rng, (B, H), 0.5), uniform(rng, (B, H), 0.5)),
        xs=uniform(rng, (T, B, I)),
        length=T,
        consts={"wy": uniform(rng, (T, B, H)), "wh": uniform(rng, (B, H)), "wc": uniform(rng, (B, H))},
        carry0_requires_grad=(True, True),
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def bptt(
    W_ih: np.ndarray,
    W_hh: np.ndarray,
    b: np.ndarray,
    xs: np.ndarray,
    h0: np.ndarray,
    c0: np.ndarray,
    dys: np.ndarray,
    dhT: np.ndarray,
    dcT: np.ndarray,
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Hand-derived float64 BPTT through the gates of one LSTM layer for given output cotangents.

    xs (T, B, I), h0, c0 (B, H); dys (T, B, H), dhT, dcT (B, H).
    Returns ({"W_ih", "W_hh", "b"}, dxs (T, B, I), dh0, dc0 (B, H))."""
    hs, cs, gates = [h0], [c0], []
    for x in xs:
        zi, zf, zg, zo = np.split(x @ W_ih.T + b + hs[-1] @ W_hh.T, 4, axis=-1)
        i, f, g, o = _sigmoid(zi), _sigmoid(zf), np.tanh(zg), _sigmoid(zo)
        cs.append(f * cs[-1] + i * g)
        hs.append(o * np.tanh(cs[-1]))
        gates.append((i, f, g, o))
    dW_ih, dW_hh, db, dxs = np.zeros_like(W_ih), np.zeros_like(W_hh), np.zeros_like(b), np.zeros_like(xs)
    dh, dc = np.array(dhT, dtype=np.float64), np.array(dcT, dtype=np.float64)
    for t in range(len(xs) - 1, -1, -1):
        i, f, g, o = gates[t]
        dh = dh + dys[t]
        tc = np.tanh(cs[t + 1])
        do = dh * tc
        dc = dc + dh * o * (1.0 - tc**2)
        dz = np.concatenate(
            [dc * g * i * (1 - i), dc * cs[t] * f * (1 - f), dc * i * (1 - g**2), do * o * (1 - o)], axis=-1
        )
        dW_ih += dz.T @ xs[t]
        dW_hh += dz.T @ hs[t]
        db += dz.sum(axis=0)
        dxs[t] = dz @ W_ih
        dh = dz @ W_hh
        dc = dc * f
    return {"W_ih": dW_ih, "W_hh": dW_hh, "b": db}, dxs, dh, dc


def outputs(
    W_ih: np.ndarray, W_hh: np.ndarray, b: np.ndarray, xs: np.ndarray, h0: np.ndarray, c0: np.ndarray
) -> np.ndarray:
    """ys (T, B, H) of one LSTM layer, float64 numpy (for oracles of models built from layers)."""
    ys, h, c = [], h0, c0
    for x in xs:
        zi, zf, zg, zo = np.split(x @ W_ih.T + b + h @ W_hh.T, 4, axis=-1)
        c = _sigmoid(zf) * c + _sigmoid(zi) * np.tanh(zg)
        h = _sigmoid(zo) * np.tanh(c)
        ys.append(h)
    return np.stack(ys)


def oracle(case: Case) -> dict[str, np.ndarray]:
    """Hand-derived float64 BPTT through the gates."""
    p, k = case.params, case.consts
    grads, _, dh0, dc0 = bptt(p["W_ih"], p["W_hh"], p["b"], case.xs, *case.carry0, k["wy"], k["wh"], k["wc"])
    if case.carry0_requires_grad[0]:
        grads["carry0.h"] = dh0
    if case.carry0_requires_grad[1]:
        grads["carry0.c"] = dc0
    return grads


def flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Projection 2TBI*4H and fused gate matmul 2TBH*4H forward. Backward: dW_ih, dW_hh, and dh
    through all T steps (h0 needs grad). Elementwise per step: bias 4BH, add 4BH, 3 sigmoid + 2 tanh,
    c update 3BH, h product BH = 17BH; loss 2TBH + 4BH."""
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    proj, rec = 2 * T * B * I * 4 * H, 2 * T * B * H * 4 * H
    return count(proj + rec, proj + 2 * rec, 17 * T * B * H + 2 * T * B * H + 4 * B * H)


MODELS = (
    Model(
        name="lstm",
        summary="LSTM (i,f,g,o), hoisted input projection, (h, c) carry with grad",
        carry_names=("h", "c"),
        default_sizes={"T": 16, "B": 4, "I": 8, "H": 16},
        make_case=make_case,
        step=step,
        loss=loss,
        prologue=prologue,
        oracle=oracle,
        oracle_kind="hand_bptt",
        cotangent_consts=lambda dys, dcarry: {"wy": dys, "wh": dcarry[0], "wc": dcarry[1]},
        kind="lstm",
        flops=flops,
        batch_axes=time_major_batch(("h", "c"), step_consts=("wy",), leaf_consts=("wh", "wc")),
    ),
)
