"""stop_gradient and the ops added with it, end to end: finite differences differentiate values, so
the oracles hold numpy stop_gradient outputs at their base values (rnnbench.ops.frozen_stop_gradients);
without that, every correct driver would be a grad_mismatch. Also: every new op through
check_recurrence on torch and jax drivers, float64 and float32."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import rnnbench
from rnnbench import registry
from rnnbench.check.differentiation import finite_diff
from rnnbench.check.differentiation.finite_diff import derivative, entry_steps, finite_differences
from rnnbench.check.verdicts.second_order import check_second_order, hvp_oracle
from rnnbench.model import Case, Model, reference_loss
from rnnbench.ops import forward_pass, frozen_stop_gradients, numpy_ops

DRIVERS = ["torch_loop", "torch_scan", "jax_lax_scan", "jax_loop", "flax_scan"]


def sg_step(ops, params, carry, x):
    """Value h/2, derivative that of h: the two differ unless the oracle freezes stop_gradient."""
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    h = h - ops.stop_gradient(h) * 0.5
    return (h,), h


SG_PARAMS = {"w": np.array([0.5, -0.3, 0.8])}


def _sg_problem() -> tuple[Model, Case]:
    rng = np.random.default_rng(0)
    model = Model(
        name="sg",
        summary="",
        carry_names=("h",),
        default_sizes={},
        make_case=None,
        step=sg_step,
        loss=lambda ops, consts, ys, carry: ops.sum(ys * consts["wy"]) + ops.sum(carry[0] * consts["wc"]),
    )
    case = Case(
        model="sg",
        sizes={"T": 5},
        seed=0,
        params=SG_PARAMS,
        carry0=(np.full(3, 0.2),),
        xs=np.ones((5, 3)),
        length=5,
        consts={"wy": rng.uniform(-1, 1, (5, 3)), "wc": rng.uniform(-1, 1, 3)},
        carry0_requires_grad=(True,),
    )
    return model, case


# -- the mechanism ---------------------------------------------------------------------------------


def test_numpy_stop_gradient_is_the_identity_outside_the_context() -> None:
    x = np.array([1.0, -2.0])
    np.testing.assert_array_equal(numpy_ops().stop_gradient(x), x)
    with forward_pass():  # a pass outside the context records nothing
        np.testing.assert_array_equal(numpy_ops().stop_gradient(2 * x), 2 * x)


def test_later_passes_replay_the_first_pass_and_contexts_do_not_leak() -> None:
    sg = numpy_ops().stop_gradient
    a, b = np.array([1.0, 2.0]), np.array([3.0])
    with frozen_stop_gradients():
        with forward_pass():
            assert sg(a) is a and sg(b) is b  # the base pass: values pass through, and are recorded
        with frozen_stop_gradients():  # an independent oracle inside: its own base
            with forward_pass():
                np.testing.assert_array_equal(sg(10 * a), 10 * a)
            with forward_pass():
                np.testing.assert_array_equal(sg(20 * a), 10 * a)
        with forward_pass():
            np.testing.assert_array_equal(sg(a + 5), a)
            np.testing.assert_array_equal(sg(b - 5), b)
    np.testing.assert_array_equal(sg(a + 5), a + 5)  # after the context: the identity again


def test_a_pass_with_another_number_of_calls_raises() -> None:
    sg = numpy_ops().stop_gradient
    x = np.zeros(2)
    with frozen_stop_gradients():
        with forward_pass():
            sg(x)
        with pytest.raises(RuntimeError, match="control flow"), forward_pass():
            sg(x), sg(x)
        with pytest.raises(RuntimeError, match="control flow"), forward_pass():
            pass
        with pytest.raises(RuntimeError, match="shape"), forward_pass():
            sg(np.zeros(3))
        with pytest.raises(RuntimeError, match="outside a forward pass"):
            sg(x)


# -- the gradient oracle ---------------------------------------------------------------------------


def test_the_oracle_freezes_stop_gradient_and_differencing_the_plain_forward_does_not() -> None:
    """Frozen finite differences agree with autodiff (torch_loop); a plain central difference of the
    same forward, which sees stop_gradient as the identity, does not."""
    pytest.importorskip("torch")
    model, case = _sg_problem()
    frozen = finite_differences(model, case)[0]
    _, autodiff = registry.get_driver("torch_loop").prepare(model, case, "float64", "cpu").loss_and_grads()
    w, steps = case.params["w"], entry_steps(case.params["w"])
    plain = np.array(
        [
            derivative(
                lambda v, i=i: reference_loss(model, case, params={"w": np.where(np.arange(3) == i, v, w)}),
                float(w[i]),
                float(steps[i]),
            )[0]
            for i in range(3)
        ]
    )
    scale = np.abs(autodiff["w"]).max()
    np.testing.assert_allclose(frozen["w"], autodiff["w"], rtol=0, atol=1e-8 * scale)
    assert np.abs(plain - autodiff["w"]).max() > 1e-2 * scale, (plain, autodiff["w"])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_stop_gradient_recurrence_agrees_on_every_driver(dtype: str) -> None:
    report = rnnbench.check_recurrence(
        sg_step, params=SG_PARAMS, carry0=(np.zeros(3),), xs=np.ones((5, 3)), drivers=DRIVERS, dtype=dtype
    )
    assert report.as_registered, str(report)


def test_without_freezing_a_correct_driver_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finite_diff, "frozen_stop_gradients", contextlib.nullcontext)
    report = rnnbench.check_recurrence(
        sg_step,
        params=SG_PARAMS,
        carry0=(np.zeros(3),),
        xs=np.ones((5, 3)),
        drivers=["torch_loop"],
        oracle="finite_differences",
    )
    assert {r.status for r in report.results} == {"grad_mismatch"}, str(report)  # under every loss form


# -- the Hessian-vector-product oracle -------------------------------------------------------------


def test_the_hvp_oracle_freezes_stop_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch double backward treats detach as a constant; the loss-difference oracle must too (the
    default, nested dual numbers, has no derivative through stop_gradient at any order)."""
    pytest.importorskip("torch")
    model, case = _sg_problem()
    prepared = registry.get_driver("torch_loop").prepare(model, case, "float64", "cpu")
    result = check_second_order(model, "torch_loop", case, prepared=prepared)
    assert result.status == "ok", result.report
    monkeypatch.setattr(finite_diff, "frozen_stop_gradients", contextlib.nullcontext)
    unfrozen = check_second_order(
        model, "torch_loop", case, prepared=prepared, oracle=hvp_oracle(model, case, choice="finite_differences")
    )
    assert unfrozen.status == "hvp_mismatch", unfrozen.report


# -- every new op through the public API -----------------------------------------------------------


def many_ops_step(ops, params, carry, x):
    """tan, log, sqrt, abs, where, maximum, minimum, flip, concat(axis=-1) and reshape on a (2, 3)
    carry. x is +-1, so no mask or extremum switches sides under a finite-difference step: where's
    mask is x's sign, |a + 2x| >= 1, and since |a| < 1, u in (0.70, 1.92) while |v| < 0.55, so
    v + 3x and v - 3x stay more than 0.5 from u."""
    (h,) = carry
    a = ops.tanh(params["w"] * ops.flip(h) + 0.5 * x)
    u = ops.sqrt(1.5 + a) + 0.3 * ops.log(2.0 + a)
    v = ops.tan(0.5 * a)
    s = ops.where(x > 0, u, v) * ops.abs(a + 2.0 * x)
    m = ops.maximum(u, v + 3.0 * x) - ops.minimum(v - 3.0 * x, u)
    r = ops.reshape(ops.concat([s, m], axis=-1), (4, 3))  # rows: s0, m0, s1, m1
    h = ops.tanh(params["b"] * r[:2] - 0.5 * r[2:])
    return (h,), h


def _flipped_loss(ops, consts, ys, carry):
    """ys read back to front, as a bidirectional recurrence's backward half is."""
    return ops.sum(ops.flip(ys) * consts["wy"]) + ops.sum(carry[0] * consts["wc"])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_new_op_agrees_on_every_driver(dtype: str) -> None:
    rng = np.random.default_rng(1)
    xs = rng.choice([-1.0, 1.0], (5, 2, 3))
    consts = {"wy": rng.uniform(-1, 1, (5, 2, 3)), "wc": rng.uniform(-1, 1, (2, 3))}
    report = rnnbench.check_recurrence(
        many_ops_step,
        params={"w": rng.uniform(-0.8, 0.8, (2, 3)), "b": rng.uniform(0.5, 1.5, (2, 3))},
        carry0=(rng.uniform(-0.5, 0.5, (2, 3)),),
        xs=xs,
        loss=_flipped_loss,
        consts=consts,
        carry0_requires_grad=True,
        xs_requires_grad=True,
        drivers=DRIVERS,
        dtype=dtype,
    )
    assert report.as_registered, str(report)
    assert {e.name for e in report.results[0].grad_errors} == {"w", "b", "carry0.c0", "xs"}
