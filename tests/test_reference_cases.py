"""BUGS.md §1 and §2 reference cases with their exact numbers, on every main-environment driver
that runs the model's own step."""

from __future__ import annotations

import numpy as np
import pytest

from rnnbench import registry
from rnnbench_models.linear import bugs_section1_case, bugs_section2_case

STEP_DRIVERS = [d.name for d in registry.drivers().values() if d.environment == "main" and not d.anchor]


@pytest.mark.parametrize("driver_name", STEP_DRIVERS)
@pytest.mark.parametrize(("final_weight", "expected"), [(0.0, 0.2687283356), (1.0, 0.4341423812)])
def test_bugs_section1_carry_cotangent(driver_name: str, final_weight: float, expected: float) -> None:
    model = registry.get_model("decay")
    loss, grads = registry.get_driver(driver_name).prepare(
        model, bugs_section1_case(final_weight), "float64", "cpu").loss_and_grads()
    if final_weight == 0.0:
        assert loss == pytest.approx(0.35571607672499994, abs=1e-15)
    assert grads["a"][0] == pytest.approx(expected, abs=5e-11)
    assert grads["a"][0] == pytest.approx(model.oracle(bugs_section1_case(final_weight))["a"][0], rel=1e-12)


@pytest.mark.parametrize("driver_name", STEP_DRIVERS)
def test_bugs_section2_reference_values(driver_name: str) -> None:
    model = registry.get_model("scan_reference")
    loss, grads = registry.get_driver(driver_name).prepare(model, bugs_section2_case(), "float64", "cpu").loss_and_grads()
    assert loss == 249.0
    np.testing.assert_array_equal(grads["carry0.c"], [12, 15, 18])
    np.testing.assert_array_equal(grads["xs"], [[12, 14, 16], [9, 11, 13], [6, 8, 10]])


def test_oracles_give_the_reference_numbers() -> None:
    assert registry.get_model("decay").oracle(bugs_section1_case(0.0))["a"][0] == pytest.approx(0.2687283356, abs=5e-11)
    ref = registry.get_model("scan_reference").oracle(bugs_section2_case())
    np.testing.assert_array_equal(ref["carry0.c"], [12, 15, 18])
    np.testing.assert_array_equal(ref["xs"], [[12, 14, 16], [9, 11, 13], [6, 8, 10]])
