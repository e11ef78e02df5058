"""docs/bugs.md §1 and §2 reference cases with their exact numbers, on every driver of this
environment that runs the model's own step. Where the known-issues registry covers a driver (torch
2.9.0's scan on §1), the case is a strict xfail that must fail exactly as registered."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from _known_issue_marks import known_issue_marks
from conftest import compile_marks
from rnnbench import registry
from rnnbench.check.bugs import known_issues
from rnnbench.check.verdicts.judge import judge
from rnnbench.machine.environments import current
from rnnbench.model import Case
from rnnbench.status import is_known
from rnnbench_models.linear import bugs_section1_case, bugs_section2_case


def step_drivers(model_name: str, case: Case) -> list:
    model = registry.get_model(model_name)
    return [
        pytest.param(d.name, marks=known_issue_marks(d.name, model, case, "float64") + compile_marks(d.name), id=d.name)
        for d in registry.drivers().values()
        if current() in d.environments and not d.anchor and d.supports(model) is None and "cpu" in d.devices
    ]


def reference_run(driver_name: str, case: Case):
    """(loss, grads) of the driver on the case. The judge (with the known-issues registry) sees the
    result first: a failure the registry expects raises KnownIssueReproduced; the caller then
    asserts the exact reference numbers, stricter than the tolerance."""
    model, driver = registry.get_model(case.model), registry.get_driver(driver_name)
    verdict = partial(judge, model, case, "float64", device="cpu", driver_name=driver_name, compiled=driver.compiled)
    try:
        produced = driver.prepare(model, case, "float64", "cpu").loss_and_grads()
    except Exception as exc:
        result = verdict(raised=exc)
        if is_known(result.status):
            raise known_issues.KnownIssueReproduced(result.status) from exc
        raise
    result = verdict(produced=produced)
    if is_known(result.status):
        raise known_issues.KnownIssueReproduced(f"{result.status}\n{result.report}")
    return produced


@pytest.mark.parametrize("driver_name", step_drivers("decay", bugs_section1_case()))
@pytest.mark.parametrize(("final_weight", "expected"), [(0.0, 0.2687283356), (1.0, 0.4341423812)])
def test_bugs_section1_carry_cotangent(driver_name: str, final_weight: float, expected: float) -> None:
    case = bugs_section1_case(final_weight)
    loss, grads = reference_run(driver_name, case)
    if final_weight == 0.0:
        assert loss == pytest.approx(0.35571607672499994, abs=1e-15)
    assert grads["a"][0] == pytest.approx(expected, abs=5e-11)
    assert grads["a"][0] == pytest.approx(registry.get_model("decay").oracle(case)["a"][0], rel=1e-12)


@pytest.mark.parametrize("driver_name", step_drivers("scan_reference", bugs_section2_case()))
def test_bugs_section2_reference_values(driver_name: str) -> None:
    loss, grads = reference_run(driver_name, bugs_section2_case())
    assert loss == 249.0
    np.testing.assert_array_equal(grads["carry0.c"], [12, 15, 18])
    np.testing.assert_array_equal(grads["xs"], [[12, 14, 16], [9, 11, 13], [6, 8, 10]])


def test_oracles_give_the_reference_numbers() -> None:
    assert registry.get_model("decay").oracle(bugs_section1_case(0.0))["a"][0] == pytest.approx(0.2687283356, abs=5e-11)
    ref = registry.get_model("scan_reference").oracle(bugs_section2_case())
    np.testing.assert_array_equal(ref["carry0.c"], [12, 15, 18])
    np.testing.assert_array_equal(ref["xs"], [[12, 14, 16], [9, 11, 13], [6, 8, 10]])
