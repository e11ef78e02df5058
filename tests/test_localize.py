"""Localization names the first step (walking back from T-1) and the leaf or parameter where a
driver's backward diverges from the oracle, and accuses nothing on a correct driver."""

from __future__ import annotations

import dataclasses

import pytest

from rnnbench import registry
from rnnbench.check.localize import localize, suffix_problem
from rnnbench.drivers import _torch
from rnnbench.drivers.base import unflatten
from rnnbench.model import reference_loss
from rnnbench.ops import torch_ops

TORCH_LOOP = registry.get_driver("torch_loop")
SIZES = {"T": 5, "B": 2, "I": 3, "H": 4}


def faulty_loop(cut_carry_after_first: bool = False, detach_params_last: bool = False):
    """torch_loop with one planted backward fault, keyed on the step index within the run:
    cut the carry between steps after the first, or detach the parameters in the last step."""

    def prepare(model, case, dtype, device):
        inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
        ops = torch_ops()

        def loss_fn(inputs):
            params, carry, xs = unflatten(model, case, inputs)
            if xs is not None and model.prologue is not None:
                xs = model.prologue(ops, params, xs)
            ys = []
            for t in range(case.length):
                if cut_carry_after_first and t >= 1:
                    carry = tuple(c.detach() for c in carry)
                p = {k: v.detach() for k, v in params.items()} if detach_params_last and t == case.length - 1 else params
                carry, y = model.step(ops, p, carry, None if xs is None else xs[t])
                ys.append(y)
            return model.loss(ops, consts, ops.stack(ys), carry)

        return _torch.prepared_from_loss(loss_fn, inputs, wrt, {})

    return dataclasses.replace(TORCH_LOOP, name="faulty_loop", prepare=prepare)


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
    loc = localize(model, TORCH_LOOP, case, "float64")
    assert loc.first_step is None and loc.complete, loc.format()
    assert "no suffix diverges" in loc.format()


def test_cut_carry_chain_is_located_at_the_first_two_step_suffix() -> None:
    model, case = rnn_case()
    loc = localize(model, faulty_loop(cut_carry_after_first=True), case, "float64")
    assert loc.first_step == case.length - 2, loc.format()
    assert loc.where[0] == "cotangent of h", loc.format()  # step 3's parameter contributions use it too


def test_wrong_parameter_contribution_is_located_at_its_step() -> None:
    model, case = rnn_case()
    loc = localize(model, faulty_loop(detach_params_last=True), case, "float64")
    assert loc.first_step == case.length - 1, loc.format()
    assert loc.where and all(w.startswith("step contribution to ") for w in loc.where), loc.format()
