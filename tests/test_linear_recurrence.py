"""A declared linear recurrence (Model.linear_recurrence) is the step's own update: for every
registered model that declares one, a_t * h + b_t equals the step's new carry and its output, at
every step of its default case; the associative drivers run exactly those models; a fuzzed linear
body declares its coefficients only while it is of the declared form, and the linear grammar draws
decays exactly 0, exactly 1 and negative; a user's step declares its recurrence through
check_recurrence(linear=...), checked against the step, and then runs on the associative drivers."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
import torch

import rnnbench
from rnnbench import registry
from rnnbench.errors import InputError
from rnnbench.fuzz import linear
from rnnbench.fuzz.campaign import Campaign
from rnnbench.fuzz.cases import build
from rnnbench.fuzz.grammar import Grammar
from rnnbench.fuzz.runner import explain
from rnnbench.model import linear_recurrence_inputs, supports_linear_recurrence
from rnnbench.ops import numpy_ops
from rnnbench.status import WRONG_GRADIENT

DECLARING = [m.name for m in registry.models().values() if m.linear_recurrence is not None]


def test_the_gated_linear_recurrences_declare_and_the_gru_does_not() -> None:
    assert {"mingru", "lru"} <= set(DECLARING)
    assert registry.models()["gru"].linear_recurrence is None
    assert supports_linear_recurrence(registry.models()["mingru"]) is None
    assert "declares no linear recurrence" in str(supports_linear_recurrence(registry.models()["gru"]))


@pytest.mark.parametrize("name", DECLARING)
def test_the_declaration_is_the_step(name: str) -> None:
    model, ops = registry.models()[name], numpy_ops()
    case = model.make_case(model.sizes_with_defaults(), 0)
    xp = model.prologue(ops, case.params, case.xs) if model.prologue else case.xs
    a, b = model.linear_recurrence(ops, case.params, xp)
    h = case.carry0[0]
    order = range(case.length - 1, -1, -1) if model.reverse else range(case.length)  # a reversed model runs T-1 .. 0
    for t in order:
        (new,), y = model.step(ops, case.params, (h,), xp[t])
        np.testing.assert_allclose(a[t] * h + b[t], new, rtol=1e-14, atol=1e-14)
        np.testing.assert_array_equal(y, new)
        h = new
    # the folded form the associative drivers scan: the running composition gives h_t
    a, b = linear_recurrence_inputs(ops, model, case.params, carry0=case.carry0, xs=case.xs)
    acc = np.zeros_like(b[0])  # h0 is folded into the first pair of the model's order
    for t in order:
        acc = a[t] * acc + b[t]
    np.testing.assert_allclose(acc, h, rtol=1e-13, atol=1e-13)


def test_the_associative_drivers_run_exactly_the_declaring_models() -> None:
    drivers = [d for d in registry.drivers().values() if d.supports is supports_linear_recurrence]
    names = {"torch_associative_scan", "torch_associative_scan_compiled", "jax_associative_scan"}
    assert {d.name for d in drivers} >= names
    for d in drivers:
        runs = {m.name for m in registry.models().values() if d.supports(m) is None}
        assert runs == set(DECLARING), d.name


def test_a_fuzzed_linear_body_declares_only_while_it_is_linear() -> None:
    body = linear.generate(0, 0)
    fc = build(body)
    assert fc.model.linear_recurrence is not None
    ops = numpy_ops()
    a, b = fc.model.linear_recurrence(ops, fc.case.params, fc.case.xs)
    (new,), _ = fc.model.step(ops, fc.case.params, fc.case.carry0, fc.case.xs[0])
    np.testing.assert_allclose(a[0] * fc.case.carry0[0] + b[0], new, rtol=1e-14, atol=1e-14)
    changed = dataclasses.replace(body, output=body.linear[1])  # y is no longer the new carry
    assert build(changed).model.linear_recurrence is None


# ---- a user's linear recurrence through check_recurrence(linear=...) ------------------------------
B, I, H, T = 2, 3, 4, 6


def _mingru_linear(ops, p, x):
    u, v = ops.split(x @ p["W"], 2)
    z = ops.sigmoid(u)
    return 1.0 - z, z * v


def _mingru_step(ops, p, carry, x):
    """minGRU written as users do, h + z (v - h): not the declaration's arithmetic, the same recurrence."""
    (h,) = carry
    u, v = ops.split(x @ p["W"], 2)
    z = ops.sigmoid(u)
    h = h + z * (v - h)
    return (h,), h


def _constant_decay(decay: float):
    """h' = decay * h + tanh(x W): a decay exactly 0 (the carry forgotten), exactly 1 (a running
    sum) or negative (the sign alternating over the steps)."""

    def linear(ops, p, x):
        b = ops.tanh(x @ p["W"])[..., :H]
        return decay + ops.zeros_like(b), b

    def step(ops, p, carry, x):
        a, b = linear(ops, p, x)
        return (a * carry[0] + b,), a * carry[0] + b

    return step, linear


def _lru_linear(ops, p, x):
    """A learned decay lam in (-1, 1) (negative entries too), the LRU's normalized drive."""
    lam = ops.tanh(p["nu"])
    b = ops.sqrt(1.0 - lam * lam) * (x @ p["W"])[..., :H]
    return lam + ops.zeros_like(b), b


def _lru_step(ops, p, carry, x):
    a, b = _lru_linear(ops, p, x)
    return (a * carry[0] + b,), a * carry[0] + b


LINEAR_STEPS = {  # name -> (step, its declaration)
    "mingru": (_mingru_step, _mingru_linear),
    "decay_0": _constant_decay(0.0),
    "decay_1": _constant_decay(1.0),
    "decay_negative": _constant_decay(-0.9),
    "lru_signed": (_lru_step, _lru_linear),
}
ASSOCIATIVE = ["torch_associative_scan", "jax_associative_scan"]


def _linear_problem():
    rng = np.random.default_rng(3)
    params = {"W": 0.5 * rng.normal(size=(I, 2 * H)), "nu": np.array([-1.5, -0.2, 0.4, 2.0])}
    return params, (rng.uniform(-1, 1, (B, H)),), rng.normal(size=(T, B, I))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(LINEAR_STEPS))
def test_a_declared_user_recurrence_runs_on_the_associative_drivers(name: str, dtype: str) -> None:
    step, linear_fn = LINEAR_STEPS[name]
    params, carry0, xs = _linear_problem()
    report = rnnbench.check_recurrence(
        step,
        params,
        carry0,
        xs=xs,
        dtype=dtype,
        linear=linear_fn,
        carry0_requires_grad=True,
        drivers=[*ASSOCIATIVE, "torch_loop"],
    )
    assert {r.driver for r in report.results if r.status == "ok"} == {*ASSOCIATIVE, "torch_loop"}, str(report)
    assert report.ok, str(report)


def test_without_a_declaration_the_associative_drivers_say_why() -> None:
    params, carry0, xs = _linear_problem()
    report = rnnbench.check_recurrence(_mingru_step, params, carry0, xs=xs, drivers=ASSOCIATIVE)
    assert {r.status for r in report.results} == {"unavailable"}
    assert "declares no linear recurrence" in report.results[0].report


def _drive_off(ops, p, x):
    a, b = _mingru_linear(ops, p, x)
    return a, 1.001 * b


def _sequence_off(ops, p, x):
    """Right per step, wrong on the whole xs (T, B, I): what the associative drivers would compose."""
    a, b = _mingru_linear(ops, p, x)
    return (a, 1.001 * b) if x.ndim == 3 else (a, b)


@pytest.mark.parametrize(
    ("linear_fn", "message"),
    [
        (_drive_off, r"linear disagrees with the step at step 0: a_t \* h \+ b_t is"),
        (_sequence_off, r"linear disagrees with the step at step 0: linear\(params, xs\)'s b\[0\]"),
        (lambda ops, p, x: _mingru_linear(ops, p, x)[0], r"linear\(params, x_0\) returned"),
        ("not a function", None),
    ],
    ids=["per_step", "whole_sequence", "one_array", "type"],
)
def test_a_declaration_that_disagrees_with_the_step_is_refused_in_one_line(linear_fn, message) -> None:
    params, carry0, xs = _linear_problem()
    if message is None:
        with pytest.raises(TypeError, match="linear is str; expected a function"):
            rnnbench.check_recurrence(_mingru_step, params, carry0, xs=xs, linear=linear_fn, drivers=ASSOCIATIVE)
        return
    with pytest.raises(InputError, match=message) as caught:
        rnnbench.check_recurrence(_mingru_step, params, carry0, xs=xs, linear=linear_fn, drivers=ASSOCIATIVE)
    assert "\n" not in str(caught.value)


class _WrongDrive(torch.autograd.Function):
    """b with a doubled backward: a planted wrong derivative in the declaration's torch path."""

    @staticmethod
    def forward(ctx, b):
        return b.clone()

    @staticmethod
    def backward(ctx, g):
        return 2.0 * g


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_planted_wrong_gradient_in_the_declaration_is_caught(dtype: str) -> None:
    def linear_fn(ops, p, x):
        a, b = _mingru_linear(ops, p, x)
        return a, (_WrongDrive.apply(b) if ops.name == "torch" else b)

    params, carry0, xs = _linear_problem()
    report = rnnbench.check_recurrence(
        _mingru_step, params, carry0, xs=xs, dtype=dtype, linear=linear_fn, drivers=ASSOCIATIVE, order=1
    )
    status = {r.driver: r.status for r in report.results}
    assert status["jax_associative_scan"] == "ok", str(report)
    assert status["torch_associative_scan"] in WRONG_GRADIENT, str(report)


# ---- the linear fuzz grammar's edge decays -------------------------------------------------------
def _first_of_each_form(seed: int = 0) -> dict[str, int]:
    found: dict[str, int] = {}
    for index in range(400):
        found.setdefault(linear.decay_form(seed, index), index)
    return found


def test_the_linear_grammar_draws_decays_at_0_1_and_negative() -> None:
    found = _first_of_each_form()
    assert set(found) == {"sigmoid", *dict(linear.DECAYS)}
    ops = numpy_ops()
    for form, index in found.items():
        fc = build(linear.generate(0, index))
        a, _ = fc.model.linear_recurrence(ops, fc.case.params, fc.case.xs)
        if form == "zero":
            assert np.all(a == 0.0)
        elif form == "one":
            assert np.all(a == 1.0)
        elif form == "negative":
            assert np.all((a < 0) & (a > -1))
        elif form == "signed":
            assert np.all(np.abs(a) < 1)
        else:
            assert np.all((a > 0) & (a < 1))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("form", sorted(dict(linear.DECAYS)))
def test_edge_decays_on_the_associative_drivers_are_ok(form: str, dtype: str) -> None:
    """The fuzzer's own path (rnnbench.fuzz.runner.fuzz) on the first body of each edge decay: no
    false alarm at either dtype (a decay exactly 1 sums T bounded drives: nothing overflows)."""
    index = _first_of_each_form()[form]
    campaign = Campaign(
        cases=index + 1,
        seed=0,
        drivers=(*ASSOCIATIVE, "torch_loop"),
        dtype=dtype,
        grammar=Grammar("linear"),
        shrink_per_kind=0,
        second_order=dtype == "float64",
    )
    fc = build(campaign.body(index), dtype=dtype)
    assert fc.model.linear_recurrence is not None
    outcomes = [explain(campaign, index, fc, driver=registry.get_driver(d), shrunk=Counter()) for d in campaign.drivers]
    assert {o.driver: o.status for o in outcomes} == dict.fromkeys(campaign.drivers, "ok"), [o.report for o in outcomes]
