"""A declared linear recurrence (Model.linear_recurrence) is the step's own update: for every
registered model that declares one, a_t * h + b_t equals the step's new carry and its output, at
every step of its default case; the associative drivers run exactly those models; a fuzzed linear
body declares its coefficients only while it is of the declared form."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rnnbench import registry
from rnnbench.fuzz import linear
from rnnbench.fuzz.cases import build
from rnnbench.model import linear_recurrence_inputs, supports_linear_recurrence
from rnnbench.ops import numpy_ops

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
    for t in range(case.length):
        (new,), y = model.step(ops, case.params, (h,), xp[t])
        np.testing.assert_allclose(a[t] * h + b[t], new, rtol=1e-14, atol=1e-14)
        np.testing.assert_array_equal(y, new)
        h = new
    # the folded form the associative drivers scan: the running composition gives h_t
    a, b = linear_recurrence_inputs(ops, model, case.params, carry0=case.carry0, xs=case.xs)
    acc = np.zeros_like(b[0])  # h0 is folded into b_0
    for t in range(case.length):
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
