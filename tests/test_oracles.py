"""The oracles themselves: hand-derived and closed-form gradients vs float64 finite differences,
and the converged limits that the Newton adjoints must reach."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from _sizes import halved
from rnnbench import registry
from rnnbench.check.compare import compare_grads
from rnnbench.check.differentiation.finite_diff import finite_differences
from rnnbench.check.tolerance import tolerance


def test_oracle_matches_finite_differences(model_name: str) -> None:
    model = registry.get_model(model_name)
    if model.oracle is None:
        pytest.skip("finite differences are this model's oracle")
    # Halved sizes (tests/_sizes.py): lstm2's 3968 entries at the default sizes took 100 s of CI.
    case = model.make_case(halved(model), seed=1)
    want = model.oracle(case)
    names = [n for n in case.wrt_names(model.carry_names) if n in want]  # finite differences fill the rest
    assert names, "the oracle covers no compared input"
    errors = compare_grads(
        finite_differences(model, case, names=names)[0], want, names, tol=tolerance("float64", "finite_differences")
    )
    assert all(e.status == "ok" for e in errors), errors


def _converged(name: str, **sizes):
    model = registry.get_model(name)
    case = model.make_case(model.sizes_with_defaults(sizes), seed=0)
    # Loss on the final iterate only: v = 0.
    case = dataclasses.replace(case, consts={**case.consts, "v": np.zeros_like(case.consts["v"])})
    return model, case


def test_newton_sqrt_converges_to_closed_form() -> None:
    model, case = _converged("newton_sqrt", K=30)
    a, w = case.params["a"], case.consts["w"]
    grads = model.oracle(case)
    np.testing.assert_allclose(grads["a"], w / (2 * np.sqrt(a)), rtol=1e-12)
    np.testing.assert_allclose(grads["carry0.y"], 0.0, atol=1e-12)  # the initial guess is forgotten


def test_newton_reciprocal_converges_to_closed_form() -> None:
    model, case = _converged("newton_reciprocal", K=30)
    a, w = case.params["a"], case.consts["w"]
    np.testing.assert_allclose(model.oracle(case)["a"], -w / a**2, rtol=1e-12)


def test_newton_schulz_converges_to_closed_form() -> None:
    model, case = _converged("newton_schulz", K=30)
    A, W = case.params["A"], case.consts["w"]
    Ainv_T = np.linalg.inv(A).T
    np.testing.assert_allclose(model.oracle(case)["A"], -Ainv_T @ W @ Ainv_T, rtol=1e-10)


def test_taylor_exp_tends_to_exp() -> None:
    model, case = _converged("taylor_exp", K=40)
    a, w = case.params["a"], case.consts["w"]
    np.testing.assert_allclose(model.oracle(case)["a"], w * np.exp(a), rtol=1e-12)


def test_taylor_sin_tends_to_cos() -> None:
    model, case = _converged("taylor_sin", K=30)
    a, w = case.params["a"], case.consts["w"]
    np.testing.assert_allclose(model.oracle(case)["a"], w * np.cos(a), rtol=1e-10, atol=1e-12)
