"""Accumulator loops whose Jacobian w.r.t. the accumulator depends on the parameter (docs/bugs.md §4),
next to the ones where it does not, evaluated where wrong gradients show: x near 0 (a wrong rule
tends to 1 there, the true gradient of acc * x^T to 0) and x of both signs.

acc_{t+1} = body(acc_t, x), y_t = acc_{t+1}, loss = sum(w * acc_T) (only the final accumulator, as
in the report: d acc_T / d x is the quantity that came out wrong). x: (n,) parameter; acc0: (n,)
requires grad. No per-step inputs; T is the trip count.

The oracle propagates first and second derivatives forward through the iteration with each body's
hand-written partials (f_a, f_x, f_aa, f_ax, f_xx), in float64: gradients for the checker and the
exact Hessian for Hessian-vector-product checks (`hessian`). Every body is elementwise, so the
Hessian of the loss w.r.t. (x, acc0) has one 2x2 block per entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from rnnbench.model import Case, Model
from rnnbench_models._common import carry_free, rng_for, uniform

# x values: two near zero (either sign), then moderate values of alternating sign.
X_NEAR_ZERO = np.array([1e-3, -1e-3, 0.35, -0.6, 0.9, -1.2])
# For division the denominator stays away from 0 (|x| >= 0.8) but still flips sign.
X_DIVISION = np.array([0.8, -0.8, 1.1, -1.3, 1.5, -0.9])


@dataclass(frozen=True)
class Body:
    """body(ops, acc, x) and its partials in numpy: (f, f_a, f_x, f_aa, f_ax, f_xx)."""

    name: str
    expr: str
    step: Callable
    partials: Callable[[np.ndarray, np.ndarray], tuple]
    x: np.ndarray


BODIES = (
    Body("mul", "acc * x", lambda ops, a, x: a * x, lambda a, x: (a * x, x, a, 0 * a, 1 + 0 * a, 0 * a), X_NEAR_ZERO),
    Body(
        "div",
        "acc / x",
        lambda ops, a, x: a / x,
        lambda a, x: (a / x, 1 / x, -a / x**2, 0 * a, -1 / x**2, 2 * a / x**3),
        X_DIVISION,
    ),
    Body(
        "sin_mul",
        "sin(acc * x)",
        lambda ops, a, x: ops.sin(a * x),
        lambda a, x: (
            np.sin(a * x),
            x * np.cos(a * x),
            a * np.cos(a * x),
            -x * x * np.sin(a * x),
            np.cos(a * x) - a * x * np.sin(a * x),
            -a * a * np.sin(a * x),
        ),
        X_NEAR_ZERO,
    ),
    Body(
        "acc_plus_acc_mul",
        "acc + acc * x",
        lambda ops, a, x: a + a * x,
        lambda a, x: (a + a * x, 1 + x, a, 0 * a, 1 + 0 * a, 0 * a),
        X_NEAR_ZERO,
    ),
    Body(
        "add",
        "acc + x",
        lambda ops, a, x: a + x,
        lambda a, x: (a + x, 1 + 0 * a, 1 + 0 * a, 0 * a, 0 * a, 0 * a),
        X_NEAR_ZERO,
    ),
    Body(
        "add_sq",
        "acc + x * x",
        lambda ops, a, x: a + x * x,
        lambda a, x: (a + x * x, 1 + 0 * a, 2 * x, 0 * a, 0 * a, 2 + 0 * a),
        X_NEAR_ZERO,
    ),
)


def derivatives(body: Body, case: Case) -> dict[str, np.ndarray]:
    """Forward propagation of acc_T's first and second derivatives w.r.t. x and acc0 (per entry)."""
    x, a = case.params["x"], case.carry0[0]
    d = {
        "x": np.zeros_like(a),
        "0": np.ones_like(a),
        "xx": np.zeros_like(a),
        "x0": np.zeros_like(a),
        "00": np.zeros_like(a),
    }
    for _ in range(case.length):
        f, fa, fx, faa, fax, fxx = body.partials(a, x)
        d = {
            "xx": faa * d["x"] ** 2 + 2 * fax * d["x"] + fa * d["xx"] + fxx,
            "x0": faa * d["x"] * d["0"] + fax * d["0"] + fa * d["x0"],
            "00": faa * d["0"] ** 2 + fa * d["00"],
            "x": fa * d["x"] + fx,
            "0": fa * d["0"],
        }
        a = f
    return d


def hessian(body: Body, case: Case) -> dict[tuple[str, str], np.ndarray]:
    """Diagonal blocks of d^2 loss / d(x, acc0)^2: {(i, j): (n,)} for i, j in ("x", "carry0.acc")."""
    w, d = case.consts["w"], derivatives(body, case)
    return {
        ("x", "x"): w * d["xx"],
        ("x", "carry0.acc"): w * d["x0"],
        ("carry0.acc", "x"): w * d["x0"],
        ("carry0.acc", "carry0.acc"): w * d["00"],
    }


def _model(body: Body) -> Model:
    name = f"loop_{body.name}"

    def step(ops, params, carry, _x):
        acc = body.step(ops, carry[0], params["x"])
        return (acc,), acc

    def loss(ops, consts, ys, carry):
        return ops.sum(carry[0] * consts["w"])

    def make_case(sizes: Mapping[str, int], seed: int) -> Case:
        rng = rng_for(name, seed)
        n = len(body.x)
        return Case(
            model=name,
            sizes=dict(sizes),
            seed=seed,
            params={"x": body.x.copy()},
            carry0=(rng.uniform(0.5, 1.0, size=n) * rng.choice([-1.0, 1.0], size=n),),
            xs=None,
            length=sizes["T"],
            consts={"w": uniform(rng, (n,))},
            carry0_requires_grad=(True,),
        )

    def oracle(case: Case) -> dict[str, np.ndarray]:
        d, w = derivatives(body, case), case.consts["w"]
        return {"x": w * d["x"], "carry0.acc": w * d["0"]}

    return Model(
        name=name,
        summary=f"acc <- {body.expr}, x near 0 and of both signs (docs/bugs.md §4)",
        carry_names=("acc",),
        default_sizes={"T": 6},
        make_case=make_case,
        step=step,
        loss=loss,
        oracle=oracle,
        oracle_kind="forward_tangents",
        cotangent_consts=lambda dys, dcarry: {"w": dcarry[0]} if not np.any(dys) and carry_free(dcarry[1:]) else None,
        suite="bugs",
    )


MODELS = tuple(_model(b) for b in BODIES)
BODY_BY_MODEL = {f"loop_{b.name}": b for b in BODIES}
