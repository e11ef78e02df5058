"""Two ties on one entry judged alike under every loss form (issue 49: under the unweighted loss
they were cannot_decide where the weighted loss said subgradient_differs; after a maximum / minimum
tie counted once it did not reproduce). Table-driven: each body's verdict per driver is the same
under `weighted`, `sum_carry` and `mean`, at float64 and float32, and it is the one expected."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import rnnbench

LOSSES = ["weighted", "sum_carry", "mean"]


def relu(ops, z):
    return ops.where(z > 0, z, 0.0)


# name -> (f(ops, z) at z = w x with w[0] = 0, the verdicts {torch_loop, jax_loop} must both give)
TIES = {
    # relu(z) - relu(-z) twice (by where and by maximum): z + z, differentiable; the frameworks give 0
    "two_relu_pairs": (
        lambda ops, z: relu(ops, z) - relu(ops, -z) + ops.maximum(z, 0.0) - ops.maximum(-z, 0.0),
        ("subgradient_differs", "subgradient_differs"),
    ),
    # two relu units of different slopes on one entry
    "two_relu_units": (
        lambda ops, z: relu(ops, z) - relu(ops, -z) + 0.3 * relu(ops, 2.0 * z) - 0.3 * relu(ops, -2.0 * z),
        ("subgradient_differs", "subgradient_differs"),
    ),
    # max and min of the same pair: their sum is 1.3 z, and the split ties add up to it
    "max_min_pair": (lambda ops, z: ops.maximum(z, 0.3 * z) + ops.minimum(z, 0.3 * z), ("ok", "ok")),
    # an identity gate and a relu pair on one entry
    "gate_and_relu": (
        lambda ops, z: ops.where(z * z > 0, z, 0.5 * z) + relu(ops, z) - relu(ops, -z),
        ("subgradient_differs", "subgradient_differs"),
    ),
    # an identity gate feeding a relu pair: two ties in a chain on one entry
    "gate_into_relu": (
        lambda ops, z: relu(ops, ops.where(z * z > 0, z, 0.5 * z)) - relu(ops, -ops.where(z * z > 0, z, 0.5 * z)),
        ("subgradient_differs", "subgradient_differs"),
    ),
    # max(z, -z) - |z| + min(z, 0) + max(z, 0) is z: torch's abs'(0) = 0 and split max give 1, jax's abs'(0) = 1
    "max_abs_min": (
        lambda ops, z: 0.7 * ops.maximum(z, -z) - 0.7 * ops.abs(z) + ops.minimum(z, 0.0) + ops.maximum(z, 0.0),
        ("ok", "subgradient_differs"),
    ),
}


def _step(f):
    def step(ops, params, carry, x):
        (h,) = carry
        h = 0.5 * h + f(ops, params["w"] * x) + ops.tanh(params["v"] * x)
        return (h,), h

    return step


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(TIES))
def test_ties_on_one_entry_are_judged_alike_under_every_loss(name: str, dtype: str) -> None:
    f, expected = TIES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        report = rnnbench.check_recurrence(
            _step(f),
            params={"w": np.array([0.0, 0.5]), "v": np.array([0.3, -0.2])},
            carry0=(np.zeros(2),),
            xs=np.ones((3, 2)),
            drivers=["torch_loop", "jax_loop"],
            losses=LOSSES,
            dtype=dtype,
            order=1,
        )
    for driver, want in zip(["torch_loop", "jax_loop"], expected):
        got = {r.loss: str(r.status) for r in report.results if r.driver == driver}
        assert got == dict.fromkeys(LOSSES, want), str(report)
