"""check_recurrence rejects bad input with a clear TypeError or InputError (a ValueError) that
names the argument and what is expected, before any driver runs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import rnnbench
from rnnbench import api
from rnnbench.errors import InputError


def tanh_step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["W"] * h + x)
    return (h,), h


def tree_step(ops, params, carry, x):
    h, s = carry["h"], carry["acc"]["s"]
    a = ops.tanh(params["W"] * h + x["u"])
    return {"h": a, "acc": {"s": s + a}}, a


def bare_carry_step(ops, params, carry, x):
    """Written as if a bare carry0 reached the step bare; it gets the 1-tuple (h,), and numpy
    broadcasting turns W * (h,) into shape (1, 2): the carry changes shape."""
    h = ops.tanh(params["W"] * carry + x)
    return h, h


def flattening_step(ops, params, carry, x):
    """Returns {"h", "s"} for a carry {"h", "acc": {"s"}}: the leaves would be matched in the wrong order."""
    h, s = carry["h"], carry["acc"]["s"]
    a = ops.tanh(params["W"] * h + x["u"])
    return {"h": a, "s": s + a}, a


def ragged_output_step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["W"] * h + x)
    return (h,), (h if float(x[0]) > 0 else h[:1])  # y_t's shape follows the data


def exploding_step(ops, params, carry, x):
    (h,) = carry
    with np.errstate(over="ignore"):
        h = ops.exp(1e3 * (params["W"] * h + x))
    return (h,), h


def in_place_carry_step(ops, params, carry, x):
    """h += x writes into the carry the step was given: jax cannot, numpy and torch would."""
    (h,) = carry
    h += x
    return (ops.tanh(params["W"] * h),), h


def in_place_params_step(ops, params, carry, x):
    (h,) = carry
    params["W"][0] = 0.0
    return (ops.tanh(params["W"] * h + x),), h


def in_place_x_step(ops, params, carry, x):
    (h,) = carry
    x *= 2.0
    return (ops.tanh(params["W"] * h + x),), h


def params_key_step(ops, params, carry, x):
    (h,) = carry
    params["scale"] = ops.ones_like(h)
    return (ops.tanh(params["W"] * h + x),), h


def carry_only(ops, params, carry, x):
    (h,) = carry
    return (ops.tanh(params["W"] * h + x),)  # no y_t


def vector_loss(ops, consts, ys, carry):
    return ys[-1]  # shape (2,)


def one_element_loss(ops, consts, ys, carry):
    return ops.sum(ys) * ops.ones_like(ys[-1][:1])  # shape (1,): jax.grad refuses it


def nan_loss(ops, consts, ys, carry):
    return ops.sum(ys) + np.nan


def scalar_loss(ops, consts, ys, carry):
    return ops.sum(ys * consts["w"])


TREE_CARRY = {"h": np.zeros(2), "acc": {"s": np.zeros(2)}}
TREE = {"step": tree_step, "carry0": TREE_CARRY, "xs": {"u": np.ones((3, 2))}}


def base_kwargs() -> dict:
    """The smallest valid call: one parameter, a one-leaf carry, three steps, one eager driver."""
    return {
        "step": tanh_step,
        "params": {"W": np.array([0.5, -0.3])},
        "carry0": (np.zeros(2),),
        "xs": np.ones((3, 2)),
        "drivers": ["torch_loop"],
        "losses": ["weighted"],
        "order": 1,
    }


def _with(a: np.ndarray, index: tuple, value: float) -> np.ndarray:
    a = np.array(a, dtype=float)
    a[index] = value
    return a


# (id, changes to base_kwargs(), exception type, words the message must contain)
CASES = [
    # a step that writes into its inputs: refused, named, not left to mismatch on the jax drivers
    ("in_place_carry", {"step": in_place_carry_step}, InputError, ["`carry[0]`", "in place", "new values"]),
    ("in_place_params", {"step": in_place_params_step}, InputError, ["`params['W']`", "in place"]),
    ("in_place_x", {"step": in_place_x_step}, InputError, ["`x`", "at step 0"]),
    ("params_key_set", {"step": params_key_step}, InputError, ["`params", "in place"]),
    # non-finite inputs: the leaf's path and the first bad index
    (
        "nan_in_params",
        {"params": {"W": np.array([0.5, np.nan])}},
        InputError,
        ["params['W']", "not finite", "nan", "index (1,)"],
    ),
    (
        "inf_in_xs",
        {"xs": _with(np.ones((3, 2)), (2, 1), np.inf)},
        InputError,
        ["xs", "not finite", "inf", "index (2, 1)"],
    ),
    (
        "nan_in_nested_carry",
        {**TREE, "carry0": {"h": np.zeros(2), "acc": {"s": np.array([0.0, np.nan])}}},
        InputError,
        ["carry0['acc']['s']", "index (1,)"],
    ),
    (
        "inf_in_xs_tree",
        {**TREE, "xs": {"u": _with(np.ones((3, 2)), (1, 0), -np.inf)}},
        InputError,
        ["xs['u']", "-inf", "index (1, 0)"],
    ),
    (
        "overflows_float32",
        {"params": {"W": np.array([0.5, 1e39])}, "dtype": "float32"},
        InputError,
        ["params['W']", "once rounded to float32", "index (1,)"],
    ),
    (
        "nan_in_consts",
        {"loss": scalar_loss, "losses": None, "consts": {"w": np.array([np.nan, 1.0])}},
        InputError,
        ["consts['w']", "index (0,)"],
    ),
    # empty and zero-size
    ("zero_steps", {"xs": np.ones((0, 2))}, InputError, ["xs", "zero steps"]),
    ("xs_without_arrays", {"xs": {}}, InputError, ["xs", "no arrays", "length"]),
    ("zero_size_param", {"params": {"W": np.zeros((2, 0))}}, InputError, ["params['W']", "zero size", "(2, 0)"]),
    ("zero_size_carry", {"carry0": (np.zeros(0),)}, InputError, ["carry0[0]", "zero size"]),
    ("zero_size_steps", {"xs": np.ones((3, 0))}, InputError, ["xs", "zero size", "(3, 0)"]),
    ("empty_carry", {"carry0": ()}, InputError, ["carry0", "needs a carry"]),
    # trip count
    ("length_contradicts_xs", {"length": 4}, InputError, ["length=4", "3 steps"]),
    ("length_zero", {"xs": None, "length": 0}, InputError, ["length", "positive"]),
    ("length_not_int", {"xs": None, "length": 2.5}, TypeError, ["length", "int"]),
    ("neither_xs_nor_length", {"xs": None}, InputError, ["xs", "length"]),
    (
        "xs_leaves_differ_in_T",
        {**TREE, "xs": {"u": np.ones((3, 2)), "v": np.ones((4, 2))}},
        InputError,
        ["leading (time) dimensions", "xs['u'] 3", "xs['v'] 4"],
    ),
    ("xs_leaf_without_time_axis", {"xs": [1.0, 2.0]}, InputError, ["xs is a list of Python numbers", "np.asarray"]),
    ("xs_leaf_scalar_array", {"xs": [np.float64(1.0), np.ones(2)]}, InputError, ["xs[0]", "leading time dimension"]),
    # the loss and the step's outputs, from one numpy forward
    ("loss_returns_vector", {"loss": vector_loss, "losses": None}, InputError, ["loss", "scalar", "(2,)"]),
    ("loss_returns_one_element", {"loss": one_element_loss, "losses": None}, InputError, ["loss", "scalar", "(1,)"]),
    ("loss_not_finite", {"loss": nan_loss, "losses": None}, InputError, ["loss", "not finite", "nan"]),
    (
        "forward_overflows",
        {"step": exploding_step},
        InputError,
        ["step 0's new carry carry[0]", "not finite", "inf", "2 non-finite entries"],
    ),
    (
        "bare_carry_step_changes_shape",
        {"step": bare_carry_step, "carry0": np.zeros(2)},
        InputError,
        ["carry[0]", "(1, 2)", "(2,)", "1-tuple"],
    ),
    (
        "step_changes_carry_structure",
        {**TREE, "step": flattening_step},
        InputError,
        ["carry['acc']['s']", "carry['s']", "carry0's structure"],
    ),
    (
        "output_shape_changes",
        {"step": ragged_output_step, "xs": np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, 1.0]])},
        InputError,
        ["step 1", "y_t", "{'y': (1,)}", "{'y': (2,)}"],
    ),
    ("step_returns_no_output", {"step": carry_only}, TypeError, ["step must return (carry, y_t)", "step 0"]),
    # names
    ("unknown_dtype", {"dtype": "float16"}, InputError, ["dtype", "'float16'", "float32, float64, bfloat16"]),
    ("unknown_loss_form", {"losses": ["wieghted"]}, InputError, ["losses", "'wieghted'", "weighted", "sum_carry"]),
    ("losses_as_string", {"losses": "weighted"}, TypeError, ["losses", "list of names"]),
    ("no_loss_form", {"losses": []}, InputError, ["losses=[]", "selects nothing"]),
    ("model_form_without_loss", {"losses": ["model"]}, InputError, ["'model'", "loss function"]),
    (
        "loss_and_losses",
        {"loss": scalar_loss, "consts": {"w": np.ones((3, 2))}},
        InputError,
        ["`loss`", "`losses`", "not both"],
    ),
    ("unknown_driver", {"drivers": ["torch_lop"]}, InputError, ["drivers", "'torch_lop'", "did you mean 'torch_loop'"]),
    ("unknown_driver_after_a_valid_one", {"drivers": ["torch_loop", "nope"]}, InputError, ["drivers", "'nope'"]),
    ("no_driver", {"drivers": []}, InputError, ["drivers=[]", "selects nothing"]),
    ("drivers_as_string", {"drivers": "torch_loop"}, TypeError, ["drivers", "list of names"]),
    ("order_3", {"order": 3}, InputError, ["order", "1", "2", "3"]),
    # params
    ("params_empty", {"params": {}}, InputError, ["params", "nothing to differentiate"]),
    ("params_int_array", {"params": {"W": np.array([1, 2])}}, TypeError, ["params['W']", "int64", "float array"]),
    ("params_none_leaf", {"params": {"W": None}}, TypeError, ["params['W']", "is None", "float array"]),
    ("params_string_leaf", {"params": {"W": "0.5"}}, TypeError, ["params['W']", "float array"]),
    ("params_names_clash", {"params": {"a": {"b": np.ones(2)}, "a.b": np.ones(2)}}, InputError, ["params", "'a.b'"]),
    ("carry_leaf_not_numeric", {"carry0": ("zeros",)}, TypeError, ["carry0[0]", "real numeric"]),
    # carry0_requires_grad against carry0
    (
        "flags_too_many",
        {"carry0_requires_grad": (True, False)},
        InputError,
        ["carry0_requires_grad", "2 entries", "carry0 has 1"],
    ),
    (
        "flags_unknown_key",
        {**TREE, "carry0_requires_grad": {"h": True, "acc": False, "extra": True}},
        InputError,
        ["carry0_requires_grad", "'extra'", "not in carry0"],
    ),
    (
        "flags_nested_key_mismatch",
        {**TREE, "carry0_requires_grad": {"h": True, "acc": {"t": True}}},
        InputError,
        ["carry0_requires_grad['acc']", "carry0['acc']", "not in carry0: ['t']", "missing: ['s']"],
    ),
    ("flags_not_bool", {"carry0_requires_grad": (1,)}, TypeError, ["carry0_requires_grad[0]", "bool"]),
    ("flags_string", {"carry0_requires_grad": "yes"}, TypeError, ["carry0_requires_grad", "'yes'", "bool"]),
    (
        "flags_dict_for_tuple_carry",
        {"carry0_requires_grad": {"h": True}},
        InputError,
        ["carry0_requires_grad", "dict", "carry0 is a tuple"],
    ),
    # the other arguments
    (
        "xs_requires_grad_without_xs",
        {"xs": None, "length": 3, "xs_requires_grad": True},
        InputError,
        ["xs_requires_grad", "xs is None"],
    ),
    ("xs_requires_grad_not_bool", {"xs_requires_grad": "yes"}, TypeError, ["xs_requires_grad", "bool"]),
    ("consts_without_loss", {"consts": {"w": np.ones(2)}}, InputError, ["consts", "loss"]),
    ("step_not_callable", {"step": None}, TypeError, ["step", "function"]),
    ("loss_not_callable", {"loss": "sum", "losses": None}, TypeError, ["loss", "function"]),
]


@pytest.fixture
def no_driver_runs(monkeypatch: pytest.MonkeyPatch) -> list:
    """Replaces the one place drivers run with a recorder that fails the test if reached."""
    calls: list = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a driver ran on input that should have been rejected")

    monkeypatch.setattr(api, "_run_drivers", refuse)
    return calls


@pytest.mark.parametrize(("changes", "error", "words"), [pytest.param(c, e, w, id=i) for i, c, e, w in CASES])
def test_bad_input_is_rejected_before_any_driver(no_driver_runs: list, changes: dict, error: type, words: list) -> None:
    with pytest.raises(error) as raised:
        rnnbench.check_recurrence(**{**base_kwargs(), **changes})
    message = str(raised.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert no_driver_runs == []


def test_case_ids_are_unique() -> None:
    assert len({case[0] for case in CASES}) == len(CASES)


def test_one_dtype_list_in_one_order(no_driver_runs: list) -> None:
    """rnnbench.api.DTYPES (public) is rnnbench.model.DTYPES, the one list, and an unknown dtype's
    message lists it in its order."""
    from rnnbench import model

    assert api.DTYPES is model.DTYPES
    with pytest.raises(InputError) as raised:
        rnnbench.check_recurrence(**{**base_kwargs(), "dtype": "float16"})
    assert str(raised.value).endswith(f"known: {', '.join(model.DTYPES)}"), str(raised.value)


# -- valid input still runs ------------------------------------------------------------------------


def test_the_smallest_valid_call_runs() -> None:
    """One step, a 0-d parameter, a bare 0-d carry (a one-leaf carry: the step gets (h,) and may
    return h bare), every default loss form, second order: torch_loop agrees with the oracle."""

    def step(ops, params, carry, x):
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return h, h

    report = rnnbench.check_recurrence(
        step,
        params={"w": np.array(0.5)},
        carry0=np.array(0.25),
        xs=np.array([1.0]),
        carry0_requires_grad=True,
        drivers=["torch_loop"],
    )
    assert report.as_registered, str(report)
    assert [r.driver for r in report.results] == ["torch_loop"] * 4
    assert {e.name for e in report.results[0].grad_errors} == {"w", "carry0.c0"}


def test_duplicate_drivers_run_once_and_consistent_arguments_pass() -> None:
    """length equal to len(xs), a list carry, flags as a prefix tree, int xs: all valid."""
    report = rnnbench.check_recurrence(
        tree_step,
        params={"W": np.array([0.5, -0.3])},
        carry0={"h": np.array([0.1, 0.2]), "acc": {"s": np.zeros(2)}},
        xs={"u": np.ones((2, 2), dtype=int)},
        length=2,
        carry0_requires_grad={"h": True, "acc": False},
        drivers=["torch_loop", "torch_loop"],
        losses=["weighted", "weighted"],
        order=1,
    )
    assert report.as_registered, str(report)
    assert [(r.driver, r.loss) for r in report.results] == [("torch_loop", "weighted")]
    assert {e.name for e in report.results[0].grad_errors} == {"W", "carry0.h"}


def test_docs_state_what_is_validated() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    match = re.search(r"^## Input validation\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, "docs/api.md has no '## Input validation' section"
    section = match.group(1)
    for phrase in (
        "before any driver runs",
        "InputError",
        "TypeError",
        "NaN",
        "zero steps",
        "length",
        "scalar",
        "dtype",
        "drivers=[]",
        "once",
        "params={}",
        "float array",
        "bare array",
        "carry0_requires_grad",
    ):
        assert phrase in section, f"the Input validation section does not mention {phrase!r}"
