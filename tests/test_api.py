"""The public API on user-written recurrences, against finite differences."""

from __future__ import annotations

import numpy as np

import rnnbench


def tanh_step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


def test_readme_example_agrees_on_every_driver() -> None:
    report = rnnbench.check_recurrence(tanh_step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),),
                                       xs=np.ones((6, 2)))
    assert report.ok, str(report)
    ran = {r.driver for r in report.results if r.status == "ok"}
    assert {"torch_loop", "torch_scan", "jax_lax_scan", "jax_loop"} <= ran
    assert report.oracle_kind == "finite_differences"


def test_pytree_carry_without_xs_and_trainable_init() -> None:
    def step(ops, params, carry, _x):  # a rotation-like pair with a parameter-dependent Jacobian
        u, v = carry
        return (u * ops.cos(params["t"]) - v * ops.sin(params["t"]), u * params["t"] + v), u * v

    report = rnnbench.check_recurrence(step, params={"t": np.array([0.3, -0.2, 0.7])},
                                       carry0=(np.ones(3), np.full(3, 0.5)), length=5, carry0_requires_grad=True,
                                       drivers=["torch_loop", "torch_scan", "jax_lax_scan"])
    assert report.ok, str(report)
    names = {e.name for e in report.results[0].grad_errors}
    assert names == {"t", "carry0.c0", "carry0.c1"}


def test_a_wrong_custom_gradient_is_reported() -> None:
    """A step whose torch backward is wrong (a custom autograd.Function with a bad derivative)
    must fail against finite differences on the torch drivers and pass on jax."""

    def step(ops, params, carry, x):
        (h,) = carry
        if ops.name == "torch":
            h = _BadTanh.apply(params["w"] * h + x)
        else:
            h = ops.tanh(params["w"] * h + x)
        return (h,), h

    report = rnnbench.check_recurrence(step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),),
                                       xs=np.ones((6, 2)), drivers=["torch_loop", "jax_lax_scan"])
    status = {r.driver: r.status for r in report.results}
    assert status == {"torch_loop": "grad_mismatch", "jax_lax_scan": "ok"}
    assert not report.ok and "grad_mismatch" in str(report)



import torch  # noqa: E402


class _BadTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z):
        y = torch.tanh(z)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y)  # wrong: should be 1 - y**2
