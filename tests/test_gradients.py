"""Every (model, driver) pair: loss and gradients agree with the independent oracle."""

from __future__ import annotations

import pytest

from rnnbench import registry
from rnnbench.run.row import Job, check_gradients, unavailable_reason


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gradients_match_oracle(model_name: str, driver_name: str, dtype: str) -> None:
    model, driver = registry.get_model(model_name), registry.get_driver(driver_name)
    reason = unavailable_reason(model, driver, Job(model_name, driver_name, dtype))
    if reason is not None:
        pytest.skip(reason)
    case = model.make_case(model.sizes_with_defaults(), seed=0).rounded_to(dtype)
    result, _ = check_gradients(model, driver, case, dtype, "cpu")
    assert result.status == "ok", result.report
    assert result.errors, "no gradient was compared"
