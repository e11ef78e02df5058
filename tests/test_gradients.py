"""Every (model, driver) pair: loss and gradients agree with the independent oracle. Pairs that
a registered upstream bug covers are strict xfails (they must fail exactly as registered)."""

from __future__ import annotations

import pytest

from rnnbench import registry
from rnnbench.check.bugs.known_issues import expect_ok
from rnnbench.rows.pair import check_gradients, unavailable_reason


def test_gradients_match_oracle(model_name: str, driver_name: str, gradient_dtype: str) -> None:
    model, driver = registry.get_model(model_name), registry.get_driver(driver_name)
    reason = unavailable_reason(model, driver, dtype=gradient_dtype, trying=True)  # as a run's worker asks
    if reason is not None:
        pytest.skip(reason)
    case = model.make_case(model.sizes_with_defaults(), seed=0).rounded_to(gradient_dtype)
    result, _ = check_gradients(model, driver, case, dtype=gradient_dtype, device="cpu")
    expect_ok(result.status, result.report)
    assert result.errors, "no gradient was compared"
