"""A carry of many scalar leaves: LEAVES 0-d arrays coupled in a ring, no per-step inputs.

s_k' = tanh(w[k] * s_k + u[k] * s_{k-1} + c[k])     k = 0 .. LEAVES-1, s_{-1} = s_{LEAVES-1}
y_t = s_0'                                           ys (T,)
loss = sum(ys * wy) + sum_k s_k(T) * wc[k]
Canonical parameters: w, u, c (LEAVES,). The initial leaves do not require grad.

Why: a pytree carry of many scalars is how small state machines, counters and hand-rolled ODE
states are written, and it is the shape of jax#40150 (grad through lax.scan on XLA:CPU 35-60x
slower than the same HLO under the old runtime): each leaf is its own buffer in the loop, so the
per-iteration cost is per leaf, not per flop. The speed matrix shows it beside the array-carry
models; its gradient is checked like every model's (oracle ladder: dual numbers over this step).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model
from rnnbench_models._common import rng_for, uniform
from rnnbench_models._flops import count

LEAVES = 32
NAMES = tuple(f"s{k}" for k in range(LEAVES))


def step(ops, params, carry, _x):
    w, u, c = params["w"], params["u"], params["c"]
    new = tuple(ops.tanh(w[k] * carry[k] + u[k] * carry[k - 1] + c[k]) for k in range(LEAVES))
    return new, new[0]


def loss(ops, consts, ys, carry):
    wc = consts["wc"]
    total = ops.sum(ys * consts["wy"])
    for k in range(LEAVES):
        total = total + carry[k] * wc[k]
    return total


def make_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("scalar_leaves", seed)
    T = sizes["T"]
    return Case(
        model="scalar_leaves",
        sizes=dict(sizes),
        seed=seed,
        params={
            "w": uniform(rng, (LEAVES,), 0.9),
            "u": uniform(rng, (LEAVES,), 0.9),
            "c": uniform(rng, (LEAVES,), 0.5),
        },
        carry0=tuple(np.asarray(v) for v in uniform(rng, (LEAVES,), 0.5)),
        xs=None,
        length=T,
        consts={"wy": uniform(rng, (T,)), "wc": uniform(rng, (LEAVES,))},
        carry0_requires_grad=(False,) * LEAVES,
    )


def flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Per leaf and step: two products, two sums, tanh (5); loss 2T + 2 LEAVES. No matmul."""
    T = sizes["T"]
    return count(0, 0, 5 * T * LEAVES + 2 * T + 2 * LEAVES)


MODELS = (
    Model(
        name="scalar_leaves",
        summary=f"a carry of {LEAVES} scalar (0-d) leaves in a ring, tanh updates, no inputs (jax#40150's shape)",
        carry_names=NAMES,
        # T=4 by default: every leaf's cotangent still crosses steps, and the drivers that unroll the loop (jax's
        # Python loop under jit, lax.scan unroll=8, dynamo) compile T x 32 scalar programs: minutes of XLA per row at
        # T=16 in the test matrix. Speed rows name their T (--sizes).
        default_sizes={"T": 4},
        make_case=make_case,
        step=step,
        loss=loss,
        oracle_kind="dual",  # the oracle ladder: dual numbers over this step
        flops=flops,
    ),
)
