"""Linear recurrences: the smallest cases that expose carry-cotangent bugs (docs/bugs.md §1, §2).

decay:          h_t = a * h_{t-1} + x_t, y_t = h_t, loss = sum(ys**2) + final_weight * sum(h_T**2).
                The initial carry does NOT require grad: the condition under which torch 2.9.0's
                scan dropped the carry cotangent.
decay_scalar:   the same recurrence on 0-dimensional a and h (xs: (T,)) with loss = sum(ys**2) only,
                exactly the upstream reproducer's form: torch 2.9.0's inductor cannot lower scan's
                backward when the carry is 0-d and the loss does not use the final carry.
scan_reference: carry_t = carry_{t-1} + x_t, y_t = carry_{t-1} * x_t, loss = sum(ys); gradients
                w.r.t. the initial carry and xs (the reference values of docs/bugs.md §2).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model
from rnnbench_models._common import rng_for, uniform
from rnnbench_models._flops import count


# ---- decay -------------------------------------------------------------------------------------
def decay_step(ops, params, carry, x):
    (h,) = carry
    h = params["a"] * h + x
    return (h,), h


def decay_loss(ops, consts, ys, carry):
    return ops.sum(ys * ys) + consts["final_weight"] * ops.sum(carry[0] * carry[0])


def decay_case(sizes: Mapping[str, int], seed: int) -> Case:
    """a: (n,) in (0.5, 0.9); x: (T, n); h0: (n,)."""
    rng = rng_for("decay", seed)
    T, n = sizes["T"], sizes["n"]
    return Case(
        model="decay",
        sizes=dict(sizes),
        seed=seed,
        params={"a": rng.uniform(0.5, 0.9, size=(n,))},
        carry0=(uniform(rng, (n,), 0.5),),
        xs=uniform(rng, (T, n), 0.5),
        length=T,
        consts={"final_weight": np.array(1.0)},
        carry0_requires_grad=(False,),
    )


def decay_scalar_case(sizes: Mapping[str, int], seed: int) -> Case:
    """a: () in (0.5, 0.9); x: (T,); h0: ()."""
    rng = rng_for("decay_scalar", seed)
    T = sizes["T"]
    return Case(
        model="decay_scalar",
        sizes=dict(sizes),
        seed=seed,
        params={"a": np.asarray(rng.uniform(0.5, 0.9), dtype=np.float64)},
        carry0=(np.asarray(uniform(rng, (), 0.5)),),
        xs=uniform(rng, (T,), 0.5),
        length=T,
        consts={"final_weight": np.array(0.0)},  # read by the oracle; decay_scalar_loss has no final term
        carry0_requires_grad=(False,),
    )


def decay_scalar_loss(ops, consts, ys, carry):
    return ops.sum(ys * ys)


def bugs_section1_case(final_weight: float = 0.0) -> Case:
    """docs/bugs.md §1 reproducer, exactly: x = [0.11, -0.37, 0.23, 0.41, -0.19], a = 0.7, h0 = 0.2.

    d loss/d a = 0.2687283356 (final_weight 0) or 0.4341423812 (final_weight 1).
    """
    return Case(
        model="decay",
        sizes={"T": 5, "n": 1},
        seed=0,
        params={"a": np.array([0.7])},
        carry0=(np.array([0.2]),),
        xs=np.array([[0.11], [-0.37], [0.23], [0.41], [-0.19]]),
        length=5,
        consts={"final_weight": np.array(final_weight)},
        carry0_requires_grad=(False,),
    )


def decay_oracle(case: Case) -> dict[str, np.ndarray]:
    """Hand-derived BPTT: g_t = dL/dh_t = 2 h_t + a g_{t+1} (+ 2 w h_T at the end)."""
    a, xs, (h0,) = case.params["a"], case.xs, case.carry0
    w = float(case.consts["final_weight"])
    hs = [h0]
    for x in xs:
        hs.append(a * hs[-1] + x)
    g_next = 2.0 * w * hs[-1]
    da = np.zeros_like(a)
    dxs = np.zeros_like(xs)
    for t in range(case.length, 0, -1):
        g = 2.0 * hs[t] + g_next  # g_next already carries the factor a
        da += g * hs[t - 1]
        dxs[t - 1] = g
        g_next = a * g
    grads = {"a": da}
    if case.carry0_requires_grad and case.carry0_requires_grad[0]:
        grads["carry0.h"] = g_next
    if case.xs_requires_grad:
        grads["xs"] = dxs
    return grads


# ---- scan_reference ----------------------------------------------------------------------------
def reference_step(ops, params, carry, x):
    (c,) = carry
    return (c + x,), c * x


def reference_loss(ops, consts, ys, carry):
    return ops.sum(ys)


def reference_case(sizes: Mapping[str, int], seed: int) -> Case:
    """No parameters: gradients w.r.t. init (n,) and xs (T, n)."""
    rng = rng_for("scan_reference", seed)
    T, n = sizes["T"], sizes["n"]
    return Case(
        model="scan_reference",
        sizes=dict(sizes),
        seed=seed,
        params={},
        carry0=(uniform(rng, (n,)),),
        xs=uniform(rng, (T, n)),
        length=T,
        carry0_requires_grad=(True,),
        xs_requires_grad=True,
    )


def bugs_section2_case() -> Case:
    """docs/bugs.md §2: init [1,1,1], xs [[1,2,3],[4,5,6],[7,8,9]] -> loss 249, d/d init [12,15,18],
    d/d xs [[12,14,16],[9,11,13],[6,8,10]]."""
    return Case(
        model="scan_reference",
        sizes={"T": 3, "n": 3},
        seed=0,
        params={},
        carry0=(np.ones(3),),
        xs=np.arange(1.0, 10.0).reshape(3, 3),
        length=3,
        carry0_requires_grad=(True,),
        xs_requires_grad=True,
    )


def reference_oracle(case: Case) -> dict[str, np.ndarray]:
    """dL/dc_{t-1} = x_t + dL/dc_t and dL/dx_t = c_{t-1} + dL/dc_t, with dL/dc_T = 0."""
    cs = [case.carry0[0]]
    for x in case.xs:
        cs.append(cs[-1] + x)
    g = np.zeros_like(cs[0])
    dxs = np.zeros_like(case.xs)
    for t in range(case.length, 0, -1):
        dxs[t - 1] = cs[t - 1] + g
        g = case.xs[t - 1] + g
    return {"carry0.c": g, "xs": dxs}


def decay_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Step a*h + x (2n); loss ys*ys summed (2Tn) and the final term (2n + 1). No matmul."""
    T, n = sizes["T"], sizes["n"]
    return count(0, 0, 4 * T * n + 2 * n + 1)


def decay_scalar_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Step a*h + x (2 per step); loss ys*ys summed (2T). No matmul."""
    return count(0, 0, 4 * sizes["T"])


def reference_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Step c + x and c * x (2n); loss sum (Tn). No matmul."""
    T, n = sizes["T"], sizes["n"]
    return count(0, 0, 3 * T * n)


MODELS = (
    Model(
        name="decay",
        summary="h_t = a*h_{t-1} + x_t; carry0 without grad (docs/bugs.md §1 shape)",
        carry_names=("h",),
        default_sizes={"T": 16, "n": 4},
        make_case=decay_case,
        step=decay_step,
        loss=decay_loss,
        oracle=decay_oracle,
        oracle_kind="hand_bptt",
        flops=decay_flops,
    ),
    Model(
        name="decay_scalar",
        summary="decay on 0-d tensors (the upstream reproducer's shape)",
        carry_names=("h",),
        default_sizes={"T": 16},
        make_case=decay_scalar_case,
        step=decay_step,
        loss=decay_scalar_loss,
        oracle=decay_oracle,
        oracle_kind="hand_bptt",
        flops=decay_scalar_flops,
    ),
    Model(
        name="scan_reference",
        summary="carry += x, y = carry*x; grads w.r.t. init and xs (docs/bugs.md §2 shape)",
        carry_names=("c",),
        default_sizes={"T": 8, "n": 3},
        make_case=reference_case,
        step=reference_step,
        loss=reference_loss,
        oracle=reference_oracle,
        oracle_kind="hand_bptt",
        flops=reference_flops,
    ),
)
