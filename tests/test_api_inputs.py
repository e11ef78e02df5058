"""check_recurrence's inputs beyond types (issue 31): params={} whenever the carry or the inputs are
differentiated (the shape of pytorch's and jax's own scan tests), lists and tuples of Python numbers
refused with the fix, and the step's outputs checked on the numpy forward (a Python number, a
non-float y_t) with one InputError naming the step, the time index and the leaf, before any
driver runs."""

from __future__ import annotations

import numpy as np
import pytest

import rnnbench
from rnnbench import registry
from rnnbench.errors import InputError
from rnnbench.machine.environments import current, runs
from rnnbench.status import Status, is_known

# every driver that runs an arbitrary step here without a slow compile (as `rnnbench fuzz` picks them)
EAGER = [d.name for d in registry.drivers().values() if runs(d, current()) and not d.anchor and not d.slow_to_compile]


def combine(ops, params, carry, x):
    """No parameters: a combine function as in the frameworks' own scan tests."""
    (h,) = carry
    h = ops.tanh(h * x + 0.5 * h)
    return (h,), h


def tanh_step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


CARRY0, XS = (np.array([0.3, -0.2]),), np.linspace(0.1, 0.9, 8).reshape(4, 2)


@pytest.mark.parametrize(
    "grads",
    [
        {"carry0_requires_grad": True},
        {"xs_requires_grad": True},
        {"carry0_requires_grad": True, "xs_requires_grad": True},
    ],
    ids=["carry0", "xs", "both"],
)
def test_params_empty_is_accepted_whenever_something_requires_grad(grads: dict) -> None:
    report = rnnbench.check_recurrence(combine, params={}, carry0=CARRY0, xs=XS, drivers=EAGER, order=1, **grads)
    assert {r.driver for r in report.results} == set(EAGER)
    for r in report.results:
        assert r.status in (Status.OK, Status.UNAVAILABLE) or is_known(r.status), (r.driver, r.loss, r.status, r.report)
    assert {"torch_loop", "jax_loop"} <= {r.driver for r in report.results if r.status == Status.OK}
    names = {e.name for r in report.results for e in r.grad_errors}
    assert names == (
        {"carry0.c0"} if "xs_requires_grad" not in grads else {"xs"} if len(grads) == 1 else {"carry0.c0", "xs"}
    ), names


def test_params_empty_with_nothing_to_differentiate_is_refused() -> None:
    with pytest.raises(InputError, match=r"params is \{\}: nothing to differentiate.*carry0_requires_grad=True"):
        rnnbench.check_recurrence(combine, params={}, carry0=CARRY0, xs=XS, drivers=["torch_loop"])


@pytest.mark.parametrize(
    "argument, where",
    [
        ({"params": {"w": [0.5, -0.3]}}, "params['w'] is a list of Python numbers"),
        ({"params": {"w": (0.5,)}}, "params['w'] is a tuple of Python numbers"),
        ({"params": {"layer": {"w": [1, 2]}}}, "params['layer']['w'] is a list of Python numbers"),
        ({"carry0": [0.0, 0.0]}, "carry0 is a list of Python numbers"),
        ({"carry0": (np.zeros(2), [0.0, 1.0])}, "carry0[1] is a list of Python numbers"),
        ({"xs": [[1.0, 2.0]] * 4}, "xs[0] is a list of Python numbers"),
    ],
)
def test_lists_of_python_numbers_are_refused_naming_the_leaf(argument: dict, where: str) -> None:
    given = {"params": {"w": np.array([0.5, -0.3])}, "carry0": CARRY0, "xs": XS, **argument}
    with pytest.raises(InputError, match="np.asarray") as info:
        rnnbench.check_recurrence(tanh_step, drivers=["torch_loop"], **given)
    assert str(info.value).startswith(where), str(info.value)


def test_consts_lists_are_refused() -> None:
    def loss(ops, consts, ys, carry):
        return ops.sum(ys * consts["w"])

    with pytest.raises(InputError, match=r"consts\['w'\] is a list of Python numbers"):
        rnnbench.check_recurrence(
            tanh_step,
            params={"w": np.array([0.5, -0.3])},
            carry0=CARRY0,
            xs=XS,
            loss=loss,
            consts={"w": [1.0, 2.0]},
            drivers=["torch_loop"],
        )


def _python_float_y(ops, params, carry, x):
    (h,) = carry
    return (ops.tanh(params["w"] * h + x),), 1.0


def _python_float_y_at_2(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    late = float(np.asarray(x)[0]) > 0.45  # from step 2 of XS on (x_2[0] = 0.5)
    return (h,), {"a": h, "b": 2.0 if late else h[0] * 2.0}


def _int_y(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), np.arange(2)


def _python_float_carry(ops, params, carry, x):
    (h,) = carry
    return 0.5, h


@pytest.mark.parametrize(
    "step, words",
    [
        (_python_float_y, "step 0's output y is the Python float 1.0"),
        (_python_float_y_at_2, "step 2's output y['b'] is the Python float 2.0"),
        (_int_y, "step 0's output y is an array of dtype int64; the step must return a float array there"),
        (_python_float_carry, "step 0's new carry carry[0] is the Python float 0.5"),
    ],
)
def test_step_outputs_are_checked_on_the_numpy_forward_before_any_driver(
    step, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rnnbench import api

    ran = []
    monkeypatch.setattr(api, "_run_drivers", lambda *a, **k: ran.append(a))
    with pytest.raises(InputError) as info:
        rnnbench.check_recurrence(
            step, params={"w": np.array([0.5, -0.3])}, carry0=CARRY0, xs=XS, drivers=["torch_loop", "jax_loop"]
        )
    assert str(info.value).startswith(words), str(info.value)
    assert ran == []
