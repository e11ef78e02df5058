"""The per_example mode's batch (rnnbench.batch, Model.batch_axes, the loss forms' restriction to one
example) and its oracle (rnnbench.check.verdicts.per_example): each example's own case (B = 1) gets the oracle
ladder's gradients, and those sum, with the form's weight, to the whole batch's gradient; a model or
loss without examples is unavailable with its reason; the registry scopes entries to the mode.
Generated from the registry: every model that declares a batch, under every loss form."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rnnbench
from rnnbench import batch, losses, modes, registry
from rnnbench.check.bugs import known_issues
from rnnbench.check.oracles.oracle import oracle_grads
from rnnbench.check.verdicts.per_example import example_oracles
from rnnbench.errors import InputError
from rnnbench.model import NO_BATCH, batch_layout
from rnnbench.rows.pair import PairPlan, check_pair

BATCHED = [m for m in registry.models().values() if m.batch_axes is not None]
# dual numbers over lstm_ln's step for 1.7k entries, per example and per form: 10 s (the slow tier's)
SLOW_ORACLES = {"lstm_ln"}


def _carry_without_batch(model) -> bool:
    return any(f"carry0.{n}" not in model.batch_axes.inputs for n in model.carry_names)


@pytest.mark.parametrize(
    "model",
    [pytest.param(m, marks=[pytest.mark.slow] if m.name in SLOW_ORACLES else [], id=m.name) for m in BATCHED],
)
def test_the_examples_oracles_sum_to_the_batch_oracle(model) -> None:
    """weight x Σ_b (example b's gradient of its own loss) is the batch's gradient, for every shared input;
    a batched input's slice b is weight x example b's gradient w.r.t. its own slice. The oracles are exact to
    rounding (hand BPTT or dual numbers), so both sides agree to float64 rounding."""
    for form in losses.NAMES:
        m, case = losses.with_loss(model, model.make_case(model.sizes_with_defaults(), seed=0), form)
        reason = batch.unavailable(m, case)
        if reason is not None:  # a term of the final carry no example owns (a parameter carried as a leaf)
            assert _carry_without_batch(m) and "does not decompose" in reason, (form, reason)
            continue
        lay = batch_layout(m, case)
        each, whole = example_oracles(m, case), oracle_grads(m, case)
        names = case.wrt_names(m.carry_names)
        per = each.grads(names)
        for name in names:
            want = np.asarray(whole.grads[name], dtype=np.float64)
            if name in lay.inputs:  # each example's gradient w.r.t. its own slice, its batch axis at size 1
                got = lay.weight * np.concatenate(list(per[name]), axis=lay.inputs[name])
            else:
                got = lay.weight * per[name].sum(axis=0)
            scale = max(float(np.max(np.abs(want))), 1e-300)
            assert np.max(np.abs(got - want)) <= 1e-12 * scale, (form, name)


def test_a_loss_that_mixes_examples_is_unavailable_with_its_reason() -> None:
    """A loss not the sum of its examples' losses (here: the square of a sum over the batch) is caught on the case."""
    rnn = registry.get_model("rnn")
    case = rnn.make_case(rnn.sizes_with_defaults(), seed=0)

    def mixing(ops, consts, ys, carry):
        return rnn.loss(ops, consts, ys, carry) + ops.sum(carry[0]) * ops.sum(carry[0])

    reason = batch.unavailable(dataclasses.replace(rnn, loss=mixing), case)
    assert reason is not None and "does not decompose over the 4 examples" in reason
    assert batch.unavailable(rnn, case) is None


def test_a_model_without_a_batch_axis_is_unavailable_with_its_reason() -> None:
    model, driver = registry.get_model("taylor_exp"), registry.get_driver("torch_loop")
    assert model.batch_axes is None
    case = model.make_case(model.sizes_with_defaults(), seed=0)
    pair = check_pair(model, driver, case, dtype="float64", device="cpu", plan=PairPlan(mode=modes.PER_EXAMPLE))
    assert (pair.status, pair.report) == ("unavailable", NO_BATCH)
    assert pair.prepared is None  # decided before the driver prepares


def test_check_recurrence_without_a_batch_says_so_and_validates_one() -> None:
    def step(ops, params, carry, x):
        (h,) = carry
        return (ops.tanh(params["w"] * h + x),), h

    args = {"params": {"w": np.array([0.5, -0.3])}, "drivers": ["jax_loop"], "losses": ["weighted"]}
    report = rnnbench.check_recurrence(step, carry0=(np.zeros(2),), xs=np.ones((3, 2)), modes="per_example", **args)
    [row] = report.results
    assert (row.mode, row.status) == ("per_example", "unavailable") and NO_BATCH in row.report
    report = rnnbench.check_recurrence(
        step, carry0=(np.zeros((2, 2)),), xs=np.ones((3, 2, 2)), modes="per_example", batched=True, **args
    )
    assert [r.status for r in report.results] == ["ok"], str(report)

    def two_leaves(ops, params, carry, x):
        return (ops.tanh(params["w"] * carry[0] + x), carry[1]), carry[0]

    with pytest.raises(InputError, match="batch axes disagree on the number of examples: carry0.0. 2, carry0.1. 3"):
        rnnbench.check_recurrence(
            two_leaves, carry0=(np.zeros((2, 2)), np.zeros((3, 2))), xs=np.ones((3, 2, 2)), batched=True, **args
        )
    with pytest.raises(TypeError, match="batched is 'yes'"):
        rnnbench.check_recurrence(step, carry0=(np.zeros((2, 2)),), xs=np.ones((3, 2, 2)), batched="yes", **args)


def test_a_registry_entry_can_be_scoped_to_per_example() -> None:
    [issue] = known_issues.parse(
        {
            "issues": [
                {
                    "id": "a-per-example-bug",
                    "title": "t",
                    "upstream": "",
                    "symptom": "s",
                    "affects": {"drivers": ["torch_loop"], "versions": {"torch": "==2.13.0"}, "modes": ["per_example"]},
                    "produces": {"statuses": ["grad_mismatch"]},
                }
            ]
        }
    )
    rnn = registry.get_model("rnn")
    case = rnn.make_case(rnn.sizes_with_defaults(), seed=0)
    kw = {"dtype": "float64", "versions": lambda p: "2.13.0"}
    assert issue.covers("torch_loop", rnn, case, **kw, mode=modes.PER_EXAMPLE)
    assert not issue.covers("torch_loop", rnn, case, **kw, mode=modes.VJP)
