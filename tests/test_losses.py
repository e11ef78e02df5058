"""The loss family (rnnbench.losses): each form's closed-form cotangents, and the hand oracles fed
those cotangents, against finite differences with their error bounds."""

from __future__ import annotations

import numpy as np
import pytest

from rnnbench import losses, registry
from rnnbench.check.compare import compare_grads
from rnnbench.check.oracles.oracle import finite_difference_oracle
from rnnbench.check.tolerance import tolerance
from rnnbench.ops import numpy_ops
from rnnbench.status import InputStatus


@pytest.mark.parametrize("form_name", list(losses.FORMS))
def test_cotangents_are_the_loss_derivative(form_name: str) -> None:
    """Central differences of the form's loss in each entry of ys and the carry; the forms are at
    most quadratic, so the step's truncation error is zero and only rounding remains."""
    form, rng = losses.FORMS[form_name], np.random.default_rng(0)
    ys, carry = rng.normal(size=(3, 2, 4)), (rng.normal(size=(2, 4)), rng.normal(size=(2, 3)))
    consts = form.weights(rng, ys, carry)
    dys, dcarry = form.cotangents(consts, ys, carry)
    ops, h = numpy_ops(), 1e-3

    def derivative(arrays: list[np.ndarray], which: int) -> np.ndarray:
        out = np.zeros_like(arrays[which])
        for i in np.ndindex(out.shape):
            values = []
            for sign in (1.0, -1.0):
                moved = [a.copy() for a in arrays]
                moved[which][i] += sign * h
                values.append(form.loss(ops, consts, moved[0], tuple(moved[1:])))
            out[i] = (values[0] - values[1]) / (2 * h)
        return out

    arrays = [ys, *carry]
    for which, want in enumerate((dys, *dcarry)):
        np.testing.assert_allclose(derivative(arrays, which), want, atol=1e-9)


SMALL = {"T": 5, "B": 2, "I": 3, "H": 4, "K": 6, "n": 3}  # finite differences cost one loss per entry


def _judged(model_name: str, form_name: str):
    base = registry.get_model(model_name)
    return losses.with_loss(base, base.make_case(base.sizes_with_defaults(SMALL), seed=1), form_name)


def _oracle_pairs() -> list:
    """Core models whose hand oracle can take the form's cotangents (the rest use finite differences)."""
    return [
        pytest.param(m.name, f, id=f"{m.name}-{f}")
        for m in registry.models().values()
        if m.suite == "core" and m.cotangent_consts is not None
        for f in losses.FORMS
        if _judged(m.name, f)[0].oracle is not None
    ]


@pytest.mark.parametrize(("oracle_model", "form_name"), _oracle_pairs())
def test_hand_oracle_under_every_loss(oracle_model: str, form_name: str) -> None:
    """A hand oracle reached through Model.cotangent_consts agrees with finite differences of the
    form's loss; where the finite differences cannot decide an entry, that entry says nothing."""
    model, case = _judged(oracle_model, form_name)
    want = model.oracle(case)
    names = [n for n in case.wrt_names(model.carry_names) if n in want]
    fd = finite_difference_oracle(model, case, names=names)
    errors = compare_grads(want, fd.grads, names, tol=tolerance("float64", "finite_differences"), error=fd.error)
    assert not [e for e in errors if e.status not in (InputStatus.OK, InputStatus.UNDECIDED)], errors
    assert any(e.status == InputStatus.OK for e in errors), errors


def test_unknown_loss_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown loss 'nope'"):
        losses.parse("weighted,nope", ["model"])
    assert losses.parse("sum_carry, mean,sum_carry", ["model"]) == ["sum_carry", "mean"]
    assert losses.parse(None, ["model"]) == ["model"]
