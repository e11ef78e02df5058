"""Gated recurrences: the GRU and two gated linear recurrences trained with parallel scans.

gru     torch.nn.GRU's convention, input projection hoisted:
        xp = xs @ W_ih.T + b_ih (T, B, 3H);  gh = h @ W_hh.T + b_hh (B, 3H); chunks (r, z, n)
        r = sigmoid(xp_r + gh_r);  z = sigmoid(xp_z + gh_z);  n = tanh(xp_n + r * gh_n)
        h' = (1 - z) * n + z * h   (r multiplies W_hn h + b_hn, as torch.nn.GRU and flax's GRUCell)
mingru  gates from the input only (minGRU): u, v = chunks of xp = xs @ W_ih.T + b (T, B, 2H)
        z = sigmoid(u);  h' = (1 - z) * h + z * v: linear in h, a = 1 - z, b = z * v
lru     a diagonal linear recurrence with a learned decay (the LRU's parametrization, real):
        lam = exp(-exp(nu)) (H,) in (0, 1);  h' = lam * h + sqrt(1 - lam**2) * (x @ W_in.T)
        Real, not complex: every op namespace, oracle and dtype of the suite is real; a complex
        diagonal recurrence is, over the reals, 2 x 2 rotation blocks, which is not the
        elementwise form the associative-scan drivers compose. The decay's learned
        parametrization, its normalization and the scan's structure are the same.
lru_reverse  lru run from the last step to the first (Model.reverse): h_t = lam h_{t+1} + b_t, ys[t] =
        h_t, the final carry is h_0: a backward direction on its own, which drivers with a native
        reverse recurrence (lax.scan's and the associative scans' reverse=True) run without a flip.
loss = sum(ys * wy) + sum(h_T * wh). Shapes: xs (T, B, I), h (B, H). h0 requires grad (mingru, lru:
the associative drivers must carry the initial state's cotangent through the combined decays).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model, time_major_batch
from rnnbench_models._common import rng_for, uniform
from rnnbench_models._flops import count


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def loss(ops, consts, ys, carry):
    return ops.sum(ys * consts["wy"]) + ops.sum(carry[0] * consts["wh"])


def _case(name: str, sizes: Mapping[str, int], seed: int, params: dict, h0_grad: bool, rng) -> Case:
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    return Case(
        model=name,
        sizes=dict(sizes),
        seed=seed,
        params=params,
        carry0=(uniform(rng, (B, H), 0.5),),
        xs=uniform(rng, (T, B, I)),
        length=T,
        consts={"wy": uniform(rng, (T, B, H)), "wh": uniform(rng, (B, H))},
        carry0_requires_grad=(h0_grad,),
    )


def linear_bptt(a: np.ndarray, b: np.ndarray, h0: np.ndarray, dys: np.ndarray, dhT: np.ndarray):
    """Hand BPTT of h_t = a_t * h_{t-1} + b_t, y_t = h_t. a, b, dys (T, B, H); h0, dhT (B, H).
    Returns (da, db (T, B, H), dh0 (B, H))."""
    hs = [h0]
    for t in range(len(a)):
        hs.append(a[t] * hs[-1] + b[t])
    da, db = np.zeros_like(a), np.zeros_like(b)
    dh = np.array(dhT, dtype=np.float64)
    for t in range(len(a) - 1, -1, -1):
        dh = dh + dys[t]
        da[t], db[t] = dh * hs[t], dh
        dh = dh * a[t]
    return da, db, dh


def linear_bptt_reverse(a: np.ndarray, b: np.ndarray, h0: np.ndarray, dys: np.ndarray, dhT: np.ndarray):
    """Hand BPTT of the reversed h_t = a_t * h_{t+1} + b_t from h_T = h0 down to t = 0, y_t = h_t,
    the final carry h_0 (cotangent dhT). Returns (da, db (T, B, H), dh0 (B, H))."""
    T = len(a)
    hs = [None] * T + [h0]  # hs[t] = h_t, hs[T] = the initial carry
    for t in range(T - 1, -1, -1):
        hs[t] = a[t] * hs[t + 1] + b[t]
    da, db = np.zeros_like(a), np.zeros_like(b)
    dh = np.array(dhT, dtype=np.float64)  # d loss / d h_t, accumulated from t = 0 upward
    for t in range(T):
        dh = dh + dys[t]
        da[t], db[t] = dh * hs[t + 1], dh
        dh = dh * a[t]
    return da, db, dh


# ---- gru ---------------------------------------------------------------------------------------
def gru_prologue(ops, params, xs):
    return ops.linear(xs, params["W_ih"], params["b_ih"])


def gru_step(ops, params, carry, xp_t):
    (h,) = carry
    xr, xz, xn = ops.split(xp_t, 3)
    hr, hz, hn = ops.split(ops.linear(h, params["W_hh"], params["b_hh"]), 3)
    r, z = ops.sigmoid(xr + hr), ops.sigmoid(xz + hz)
    n = ops.tanh(xn + r * hn)
    h = (1.0 - z) * n + z * h
    return (h,), h


def gru_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("gru", seed)
    I, H = sizes["I"], sizes["H"]
    k = 1.0 / np.sqrt(H)  # torch.nn.GRU's default init range
    params = {
        "W_ih": uniform(rng, (3 * H, I), k),
        "W_hh": uniform(rng, (3 * H, H), k),
        "b_ih": uniform(rng, (3 * H,), k),
        "b_hh": uniform(rng, (3 * H,), k),
    }
    return _case("gru", sizes, seed, params, True, rng)


def gru_bptt(p: Mapping[str, np.ndarray], xs: np.ndarray, h0: np.ndarray, dys: np.ndarray, dhT: np.ndarray):
    """Hand-derived float64 BPTT through the GRU's gates. xs (T, B, I), h0 (B, H), dys (T, B, H).
    Returns ({"W_ih", "W_hh", "b_ih", "b_hh"}, dh0 (B, H))."""
    W_ih, W_hh, b_ih, b_hh = p["W_ih"], p["W_hh"], p["b_ih"], p["b_hh"]
    hs, saved = [h0], []
    for x in xs:
        xr, xz, xn = np.split(x @ W_ih.T + b_ih, 3, axis=-1)
        hr, hz, hn = np.split(hs[-1] @ W_hh.T + b_hh, 3, axis=-1)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        hs.append((1.0 - z) * n + z * hs[-1])
        saved.append((r, z, n, hn))
    grads = {k: np.zeros_like(v) for k, v in p.items()}
    dh = np.array(dhT, dtype=np.float64)
    for t in range(len(xs) - 1, -1, -1):
        r, z, n, hn = saved[t]
        dh = dh + dys[t]
        dn = dh * (1.0 - z) * (1.0 - n**2)
        dz = dh * (hs[t] - n) * z * (1.0 - z)
        dr = dn * hn * r * (1.0 - r)
        dxp = np.concatenate([dr, dz, dn], axis=-1)
        dgh = np.concatenate([dr, dz, dn * r], axis=-1)
        grads["W_ih"] += dxp.T @ xs[t]
        grads["b_ih"] += dxp.sum(axis=0)
        grads["W_hh"] += dgh.T @ hs[t]
        grads["b_hh"] += dgh.sum(axis=0)
        dh = dh * z + dgh @ W_hh
    return grads, dh


def gru_oracle(case: Case) -> dict[str, np.ndarray]:
    grads, dh0 = gru_bptt(case.params, case.xs, case.carry0[0], case.consts["wy"], case.consts["wh"])
    if case.carry0_requires_grad[0]:
        grads["carry0.h"] = dh0
    return grads


def gru_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Projection 2TBI*3H and hidden matmul 2TBH*3H forward; backward: dW_ih, dW_hh and dh through
    all T steps (h0 needs grad). Elementwise per step: 2 biases 6BH, 2 adds 2BH, 2 sigmoid + tanh
    3BH, r * gh_n, add BH each, update 4BH = 17BH; loss 2TBH + 2BH."""
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    proj, rec = 2 * T * B * I * 3 * H, 2 * T * B * H * 3 * H
    return count(proj + rec, proj + 2 * rec, 17 * T * B * H + 2 * T * B * H + 2 * B * H)


# ---- mingru ------------------------------------------------------------------------------------
def mingru_prologue(ops, params, xs):
    return ops.linear(xs, params["W_ih"], params["b"])


def mingru_linear(ops, params, xp):
    """(a, b) of minGRU's update from the projected input xp (..., 2H): a = 1 - z, b = z * v."""
    u, v = ops.split(xp, 2)
    z = ops.sigmoid(u)
    return 1.0 - z, z * v


def mingru_step(ops, params, carry, xp_t):
    a, b = mingru_linear(ops, params, xp_t)
    h = a * carry[0] + b
    return (h,), h


def mingru_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("mingru", seed)
    I, H = sizes["I"], sizes["H"]
    k = 1.0 / np.sqrt(I)
    params = {"W_ih": uniform(rng, (2 * H, I), k), "b": uniform(rng, (2 * H,), k)}
    return _case("mingru", sizes, seed, params, True, rng)


def mingru_oracle(case: Case) -> dict[str, np.ndarray]:
    """Hand BPTT of the linear recurrence, then through the gates: a = 1 - sigmoid(u), b = sigmoid(u) v."""
    p, xs = case.params, case.xs
    u, v = np.split(xs @ p["W_ih"].T + p["b"], 2, axis=-1)
    z = _sigmoid(u)
    da, db, dh0 = linear_bptt(1.0 - z, z * v, case.carry0[0], case.consts["wy"], case.consts["wh"])
    dxp = np.concatenate([(db * v - da) * z * (1.0 - z), db * z], axis=-1)  # (T, B, 2H)
    grads = {"W_ih": np.einsum("tbo,tbi->oi", dxp, xs), "b": dxp.sum(axis=(0, 1))}
    if case.carry0_requires_grad[0]:
        grads["carry0.h"] = dh0
    return grads


def mingru_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Projection 2TBI*2H forward (its dW_ih backward; xs needs no grad). Elementwise per step: bias
    2BH, sigmoid, 1 - z, z * v, a * h, + b = 7BH; loss 2TBH + 2BH."""
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    proj = 2 * T * B * I * 2 * H
    return count(proj, proj, 7 * T * B * H + 2 * T * B * H + 2 * B * H)


# ---- lru ---------------------------------------------------------------------------------------
def lru_prologue(ops, params, xs):
    return ops.linear(xs, params["W_in"])


def lru_linear(ops, params, xp):
    """(a, b) from the projected input xp (..., H): a = lam broadcast to xp's shape, b = gamma * xp."""
    lam = ops.exp(-ops.exp(params["nu"]))
    gamma = ops.sqrt(1.0 - lam * lam)  # the LRU's normalization: unit variance of h for white input
    return lam + ops.zeros_like(xp), gamma * xp


def lru_step(ops, params, carry, xp_t):
    a, b = lru_linear(ops, params, xp_t)
    h = a * carry[0] + b
    return (h,), h


def lru_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("lru", seed)
    I, H = sizes["I"], sizes["H"]
    lam = rng.uniform(0.5, 0.99, size=(H,))  # decays of the LRU's ring initialization, real
    params = {"nu": np.log(-np.log(lam)), "W_in": uniform(rng, (H, I), 1.0 / np.sqrt(I))}
    return _case("lru", sizes, seed, params, True, rng)


def lru_oracle(case: Case, bptt=linear_bptt) -> dict[str, np.ndarray]:
    """Hand BPTT of the linear recurrence (bptt: in its order), then d lam / d nu = -lam e^nu and
    d gamma / d lam = -lam / gamma."""
    p, xs = case.params, case.xs
    e = np.exp(p["nu"])
    lam = np.exp(-e)
    gamma = np.sqrt(1.0 - lam**2)
    xp = xs @ p["W_in"].T
    a = np.broadcast_to(lam, xp.shape)
    da, db, dh0 = bptt(a, gamma * xp, case.carry0[0], case.consts["wy"], case.consts["wh"])
    dlam = da.sum(axis=(0, 1)) + (db * xp).sum(axis=(0, 1)) * (-lam / gamma)
    grads = {"nu": dlam * (-lam * e), "W_in": np.einsum("tbo,tbi->oi", db * gamma, xs)}
    if case.carry0_requires_grad[0]:
        grads["carry0.h"] = dh0
    return grads


def lru_reverse_case(sizes: Mapping[str, int], seed: int) -> Case:
    return dataclasses.replace(lru_case(sizes, seed), model="lru_reverse")


def lru_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Projection 2TBI*H forward (its dW_in backward). Elementwise per step: lam broadcast, gamma
    * xp, a * h, + b = 4BH (the decay's own 5H once); loss 2TBH + 2BH."""
    T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
    proj = 2 * T * B * I * H
    return count(proj, proj, 4 * T * B * H + 5 * H + 2 * T * B * H + 2 * B * H)


SIZES = {"T": 16, "B": 4, "I": 8, "H": 16}


def _cotangents(dys, dcarry):
    return {"wy": dys, "wh": dcarry[0]}


# What the three models share: one hidden state h, the family's sizes, loss, hand BPTT oracles and cotangents.
_gru_family = functools.partial(
    Model,
    carry_names=("h",),
    default_sizes=SIZES,
    loss=loss,
    oracle_kind="hand_bptt",
    cotangent_consts=_cotangents,
    batch_axes=time_major_batch(("h",), step_consts=("wy",), leaf_consts=("wh",)),
)

MODELS = (
    _gru_family(
        name="gru",
        summary="GRU (r, z, n; torch.nn.GRU's convention), hoisted input projection, h0 with grad",
        make_case=gru_case,
        step=gru_step,
        prologue=gru_prologue,
        oracle=gru_oracle,
        kind="gru",
        flops=gru_flops,
    ),
    _gru_family(
        name="mingru",
        summary="minGRU: gates from the input only, h' = (1 - z) h + z v, a linear recurrence",
        make_case=mingru_case,
        step=mingru_step,
        prologue=mingru_prologue,
        oracle=mingru_oracle,
        flops=mingru_flops,
        linear_recurrence=mingru_linear,
    ),
    _gru_family(
        name="lru",
        summary="LRU, real: h' = lam h + sqrt(1 - lam^2) W_in x, lam = exp(-exp(nu)) learned",
        make_case=lru_case,
        step=lru_step,
        prologue=lru_prologue,
        oracle=lru_oracle,
        flops=lru_flops,
        linear_recurrence=lru_linear,
    ),
    _gru_family(
        name="lru_reverse",
        summary="lru run from the last step to the first (Model.reverse): h_t = lam h_{t+1} + b_t",
        make_case=lru_reverse_case,
        step=lru_step,
        prologue=lru_prologue,
        oracle=functools.partial(lru_oracle, bptt=linear_bptt_reverse),
        flops=lru_flops,
        linear_recurrence=lru_linear,
        reverse=True,
    ),
)
