"""Recurrences chained in one graph: two stacked layers, layer 2 scanning layer 1's outputs, and a
bidirectional layer, one recurrence over the flipped sequence.

Each layer is a recurrence run through the driver's own mechanism (`recur`: a Python loop, torch
scan, lax.scan, nn.scan, torch_xla scan), so a compiled driver sees two scans in one program, the
shape pytorch/pytorch#153679 reports wrong inductor gradients for. The hand oracles chain the
layers' BPTT (models/rnn.py, models/lstm.py): layer 2's input cotangent is layer 1's output
cotangent.

rnn2:  xp1 = xs @ W_ih1.T + b1;  h1_t = tanh(xp1_t + h1_{t-1} @ W_hh1.T)      ys1 (T, B, H)
       xp2 = ys1 @ W_ih2.T + b2; h2_t = tanh(xp2_t + h2_{t-1} @ W_hh2.T)     ys = ys2 (T, B, H)
lstm2: the same with LSTM layers; carry (h1, c1, h2, c2).
birnn: ys_f = layer_f(xs); ys_b = flip(layer_b(flip(xs))); ys = [ys_f, ys_b] (T, B, 2H); carry (h_f, h_b).
loss = sum(ys * wy) + sum_k sum(carry_k * w_<carry name>), fixed random weights.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model, time_major_batch
from rnnbench_models import lstm, rnn
from rnnbench_models._common import rng_for, uniform
from rnnbench_models._flops import count

LAYERS = (1, 2)


def _layer(params, k: int) -> tuple:
    return params[f"W_ih{k}"], params[f"W_hh{k}"], params[f"b{k}"]


def rnn2_forward(ops, params, carry0, xs, length, recur):
    h1, h2 = carry0
    W_ih, W_hh, b = _layer(params, 1)
    ys1, (h1,) = recur(rnn.step, {"W_hh": W_hh}, (h1,), ops.linear(xs, W_ih, b), length)
    W_ih, W_hh, b = _layer(params, 2)
    ys2, (h2,) = recur(rnn.step, {"W_hh": W_hh}, (h2,), ops.linear(ys1, W_ih, b), length)
    return ys2, (h1, h2)


def lstm2_forward(ops, params, carry0, xs, length, recur):
    h1, c1, h2, c2 = carry0
    W_ih, W_hh, b = _layer(params, 1)
    ys1, (h1, c1) = recur(lstm.step, {"W_hh": W_hh}, (h1, c1), ops.linear(xs, W_ih, b), length)
    W_ih, W_hh, b = _layer(params, 2)
    ys2, (h2, c2) = recur(lstm.step, {"W_hh": W_hh}, (h2, c2), ops.linear(ys1, W_ih, b), length)
    return ys2, (h1, c1, h2, c2)


def weighted_loss(carry_names: tuple[str, ...]):
    def loss(ops, consts, ys, carry):
        total = ops.sum(ys * consts["wy"])
        for name, leaf in zip(carry_names, carry):
            total = total + ops.sum(leaf * consts[f"w_{name}"])
        return total

    return loss


def case_maker(
    name: str,
    gates: int,
    carry_names: tuple[str, ...],
    carry0_requires_grad: tuple[bool, ...],
    layers: tuple[tuple[str, str], ...] = tuple(zip(LAYERS, ("I", "H"))),
    directions: int = 1,
):
    """layers: (parameter suffix, the size naming its input width); ys is (T, B, directions * H)."""

    def make_case(sizes: Mapping[str, int], seed: int) -> Case:
        rng = rng_for(name, seed)
        T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
        k = 1.0 / np.sqrt(H)  # torch.nn's default init range
        params = {}
        for layer, width in ((suffix, sizes[size]) for suffix, size in layers):
            params.update(
                {
                    f"W_ih{layer}": uniform(rng, (gates * H, width), k),
                    f"W_hh{layer}": uniform(rng, (gates * H, H), k),
                    f"b{layer}": uniform(rng, (gates * H,), k),
                }
            )
        return Case(
            model=name,
            sizes=dict(sizes),
            seed=seed,
            params=params,
            carry0=tuple(uniform(rng, (B, H), 0.5) for _ in carry_names),
            xs=uniform(rng, (T, B, I)),
            length=T,
            consts={
                "wy": uniform(rng, (T, B, directions * H)),
                **{f"w_{n}": uniform(rng, (B, H)) for n in carry_names},
            },
            carry0_requires_grad=carry0_requires_grad,
        )

    return make_case


def birnn_forward(ops, params, carry0, xs, length, recur):
    """Forward layer over xs; backward layer over the flipped sequence, its outputs flipped back;
    ys = [ys_f, ys_b] along the last axis, (T, B, 2H)."""
    h_f, h_b = carry0
    W_ih, W_hh, b = _layer(params, "_f")
    ys_f, (h_f,) = recur(rnn.step, {"W_hh": W_hh}, (h_f,), ops.linear(xs, W_ih, b), length)
    W_ih, W_hh, b = _layer(params, "_b")
    ys_b, (h_b,) = recur(rnn.step, {"W_hh": W_hh}, (h_b,), ops.flip(ops.linear(xs, W_ih, b)), length)
    return ops.concat((ys_f, ops.flip(ys_b)), axis=-1), (h_f, h_b)


def birnn_oracle(case: Case) -> dict[str, np.ndarray]:
    """Each direction's BPTT; the backward one runs on the flipped sequence with the flipped slice
    of d loss/d ys."""
    p, k, (h_f, h_b) = case.params, case.consts, case.carry0
    H = h_f.shape[-1]
    g_f, _, dh_f = rnn.bptt(*_layer(p, "_f"), case.xs, h_f, k["wy"][..., :H], k["w_h_f"])
    g_b, _, dh_b = rnn.bptt(*_layer(p, "_b"), case.xs[::-1], h_b, k["wy"][::-1, ..., H:], k["w_h_b"])
    return {**_named(g_f, "_f"), **_named(g_b, "_b"), **_carry_grads(case, BIRNN_CARRY, (dh_f, dh_b))}


def cotangent_consts(carry_names: tuple[str, ...]):
    return lambda dys, dcarry: {"wy": dys, **{f"w_{n}": d for n, d in zip(carry_names, dcarry)}}


def _named(grads: dict[str, np.ndarray], layer: int | str) -> dict[str, np.ndarray]:
    return {f"{k}{layer}": v for k, v in grads.items()}


def _carry_grads(case: Case, carry_names: tuple[str, ...], values: tuple) -> dict[str, np.ndarray]:
    return {f"carry0.{n}": v for n, v, g in zip(carry_names, values, case.carry0_requires_grad) if g}


def rnn2_oracle(case: Case) -> dict[str, np.ndarray]:
    """Layer 2's BPTT, whose input cotangent is layer 1's output cotangent, then layer 1's."""
    p, k, (h1, h2) = case.params, case.consts, case.carry0
    ys1 = rnn.outputs(*_layer(p, 1), case.xs, h1)
    g2, dys1, dh2 = rnn.bptt(*_layer(p, 2), ys1, h2, k["wy"], k["w_h2"])
    g1, _, dh1 = rnn.bptt(*_layer(p, 1), case.xs, h1, dys1, k["w_h1"])
    return {**_named(g1, 1), **_named(g2, 2), **_carry_grads(case, ("h1", "h2"), (dh1, dh2))}


def lstm2_oracle(case: Case) -> dict[str, np.ndarray]:
    p, k, (h1, c1, h2, c2) = case.params, case.consts, case.carry0
    ys1 = lstm.outputs(*_layer(p, 1), case.xs, h1, c1)
    g2, dys1, dh2, dc2 = lstm.bptt(*_layer(p, 2), ys1, h2, c2, k["wy"], k["w_h2"], k["w_c2"])
    g1, _, dh1, dc1 = lstm.bptt(*_layer(p, 1), case.xs, h1, c1, dys1, k["w_h1"], k["w_c1"])
    return {**_named(g1, 1), **_named(g2, 2), **_carry_grads(case, ("h1", "c1", "h2", "c2"), (dh1, dc1, dh2, dc2))}


def flops_counter(
    gates: int, elementwise_per_step: int, carry_leaves: int, carry0_needs_grad: bool, bidirectional: bool = False
):
    """Per layer as models/rnn.py and models/lstm.py count one layer, with layer 2's projection
    reading ys1 (width H) and needing the input gradient too, since ys1 depends on layer 1's params.
    The recurrent dh matmul runs through T steps when carry0 needs grad, else T-1."""

    def flops(sizes: Mapping[str, int]) -> dict[str, float]:
        T, B, I, H = sizes["T"], sizes["B"], sizes["I"], sizes["H"]
        G = gates * H
        proj1, proj2, rec = 2 * T * B * I * G, 2 * T * B * H * G, 2 * T * B * H * G
        dh_steps = T if carry0_needs_grad else T - 1
        rec_bwd = rec + 2 * dh_steps * B * G * H
        loss = 2 * T * B * H * (2 if bidirectional else 1) + 2 * carry_leaves * B * H
        elementwise = len(LAYERS) * elementwise_per_step * T * B * H + loss
        if bidirectional:  # both layers read xs (no input gradient); ys is (T, B, 2H)
            return count(2 * proj1 + 2 * rec, 2 * proj1 + 2 * rec_bwd, elementwise)
        return count(proj1 + proj2 + 2 * rec, proj1 + 2 * proj2 + 2 * rec_bwd, elementwise)

    return flops


SIZES = {"T": 16, "B": 4, "I": 8, "H": 16}
RNN2_CARRY, LSTM2_CARRY, BIRNN_CARRY = ("h1", "h2"), ("h1", "c1", "h2", "c2"), ("h_f", "h_b")
MODELS = (
    Model(
        name="rnn2",
        summary="2 stacked Elman layers, layer 2 scans layer 1's outputs",
        carry_names=RNN2_CARRY,
        default_sizes=SIZES,
        make_case=case_maker("rnn2", 1, RNN2_CARRY, (False, False)),
        step=rnn.step,
        loss=weighted_loss(RNN2_CARRY),
        forward=rnn2_forward,
        oracle=rnn2_oracle,
        oracle_kind="hand_bptt",
        cotangent_consts=cotangent_consts(RNN2_CARRY),
        batch_axes=time_major_batch(RNN2_CARRY, step_consts=("wy",), leaf_consts=[f"w_{n}" for n in RNN2_CARRY]),
        kind="elman_tanh_2layer",
        flops=flops_counter(1, 3, len(RNN2_CARRY), False),
    ),
    Model(
        name="lstm2",
        summary="2 stacked LSTM layers, layer 2 scans layer 1's outputs",
        carry_names=LSTM2_CARRY,
        default_sizes=SIZES,
        make_case=case_maker("lstm2", 4, LSTM2_CARRY, (True,) * 4),
        step=lstm.step,
        loss=weighted_loss(LSTM2_CARRY),
        forward=lstm2_forward,
        oracle=lstm2_oracle,
        oracle_kind="hand_bptt",
        cotangent_consts=cotangent_consts(LSTM2_CARRY),
        batch_axes=time_major_batch(LSTM2_CARRY, step_consts=("wy",), leaf_consts=[f"w_{n}" for n in LSTM2_CARRY]),
        kind="lstm_2layer",
        flops=flops_counter(4, 17, len(LSTM2_CARRY), True),
    ),
    Model(
        name="birnn",
        summary="bidirectional Elman layer: one recurrence over xs, one over the flipped sequence",
        carry_names=BIRNN_CARRY,
        default_sizes=SIZES,
        make_case=case_maker("birnn", 1, BIRNN_CARRY, (True, True), layers=(("_f", "I"), ("_b", "I")), directions=2),
        step=rnn.step,
        loss=weighted_loss(BIRNN_CARRY),
        forward=birnn_forward,
        oracle=birnn_oracle,
        oracle_kind="hand_bptt",
        cotangent_consts=cotangent_consts(BIRNN_CARRY),
        batch_axes=time_major_batch(BIRNN_CARRY, step_consts=("wy",), leaf_consts=[f"w_{n}" for n in BIRNN_CARRY]),
        kind="elman_tanh_bidirectional",
        flops=flops_counter(1, 3, len(BIRNN_CARRY), True, bidirectional=True),
    ),
)
