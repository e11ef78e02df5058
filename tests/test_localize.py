"""Localization names the first step (walking back from T-1) and the leaf or parameter where a
driver's backward diverges from the oracle, and accuses nothing on a correct driver."""

from __future__ import annotations

import pytest
from rnnbench_faulty import faulty_loop

from rnnbench import registry
from rnnbench.check.verdicts.localize import localize, suffix_problem
from rnnbench.model import reference_loss

TORCH_LOOP = registry.get_driver("torch_loop")
SIZES = {"T": 5, "B": 2, "I": 3, "H": 4}


def rnn_case():
    model = registry.get_model("rnn")
    return model, model.make_case(model.sizes_with_defaults(SIZES), 0)


def test_suffix_problem_has_the_same_loss() -> None:
    model, case = rnn_case()
    for t in range(case.length):
        sub_model, sub_case = suffix_problem(model, case, t)
        assert reference_loss(sub_model, sub_case) == pytest.approx(reference_loss(model, case), rel=1e-14, abs=1e-14)


def test_correct_driver_is_not_accused() -> None:
    model, case = rnn_case()
    loc = localize(model, TORCH_LOOP, case, dtype="float64")
    assert loc.first_step is None and loc.complete, loc.format()
    assert "no suffix diverges" in loc.format()


def test_cut_carry_chain_is_located_at_the_first_two_step_suffix() -> None:
    model, case = rnn_case()
    loc = localize(model, faulty_loop(cut_carry_from=1), case, dtype="float64")
    assert loc.first_step == case.length - 2, loc.format()
    assert loc.where[0] == "cotangent of h", loc.format()  # step 3's parameter contributions use it too


def test_wrong_parameter_contribution_is_located_at_its_step() -> None:
    model, case = rnn_case()
    loc = localize(model, faulty_loop(detach_params_last=True), case, dtype="float64")
    assert loc.first_step == case.length - 1, loc.format()
    assert loc.where and all(w.startswith("step contribution to ") for w in loc.where), loc.format()
