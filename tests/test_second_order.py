"""Second order: every driver with a double-backward / forward-over-reverse path gives the Hessian-
vector product of every core model, checked at float64 against the gradient-difference oracle (the
hand-derived gradient differenced along v; no autodiff). Pairs a registered upstream bug covers are
strict xfails. Also: the two H v oracles agree, and a wrong second derivative is caught."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from _sizes import halved
from rnnbench import registry
from rnnbench.check.bugs.known_issues import expect_ok
from rnnbench.check.compare import compare_grads
from rnnbench.check.differentiation.hvp import finite_difference_hvp, gradient_difference_hvp
from rnnbench.check.tolerance import hvp_tolerance
from rnnbench.check.verdicts.second_order import check_second_order, direction, hvp_oracle
from rnnbench.model import reference_loss
from rnnbench.rows.pair import unavailable_reason


def test_hvp_matches_oracle(second_order_model: str, second_order_driver: str) -> None:
    model, driver = registry.get_model(second_order_model), registry.get_driver(second_order_driver)
    reason = unavailable_reason(model, driver, dtype="float64", environment="main")
    if reason is not None:
        pytest.skip(reason)
    # Halved sizes (tests/_sizes.py; the marks of conftest.second_order_pairs use the same case):
    # jax_loop's H v program of lstm2 at T=16 took 172 s of CPU to compile, at T=8 17 s.
    case = model.make_case(halved(model), seed=0)
    prepared = driver.prepare(model, case, "float64", "cpu")
    assert prepared.hvp is not None, f"{driver.name} declares second_order but its Prepared has no hvp"
    result = check_second_order(model, driver.name, case, prepared=prepared)
    assert result.status != "ill_conditioned", result.report
    expect_ok(result.status, result.report)


def small_case(model):
    """The model's case at about half its default sizes: the loss-difference oracle costs 8 forward
    passes per input entry."""
    sizes = {k: max(2, v // 2) for k, v in model.sizes_with_defaults().items()}
    return model.make_case(model.sizes_with_defaults(sizes), seed=1)


def test_hvp_oracles_agree(hand_oracle_model_name: str) -> None:
    """Loss differences (forward only) and gradient differences (hand-derived gradient) agree."""
    model = registry.get_model(hand_oracle_model_name)
    case = small_case(model)
    v = direction(model, case, seed=1)
    names = case.wrt_names(model.carry_names)
    by_gradient = gradient_difference_hvp(model, case, v)
    by_loss = finite_difference_hvp(model, case, v)
    errors = compare_grads(
        by_loss, by_gradient, names, tol=hvp_tolerance("finite_differences_hvp", reference_loss(model, case))
    )
    assert all(e.status == "ok" for e in errors), errors
    assert any(np.any(by_gradient[n]) for n in names), "H v is identically zero: the comparison proves nothing"


def test_wrong_second_derivative_is_caught() -> None:
    """A driver whose gradient is right but whose H v drops a term (the torch_scan class) fails."""
    model = registry.get_model("rnn")
    case = model.make_case(model.sizes_with_defaults(), seed=0)
    prepared = registry.get_driver("torch_loop").prepare(model, case, "float64", "cpu")
    oracle = hvp_oracle(model, case)
    exact = prepared.hvp(oracle.v)
    half = dataclasses.replace(prepared, hvp=lambda v: {n: 0.5 * h for n, h in exact.items()})
    result = check_second_order(model, "torch_loop", case, prepared=half, oracle=oracle)
    assert result.status == "hvp_mismatch", result.report
    assert check_second_order(model, "torch_loop", case, prepared=prepared, oracle=oracle).status == "ok"
