"""float64 Hessian-vector-product oracles that share no engine with any driver.

Two, by what the model offers:
  - gradient differences (models with an analytic oracle): H v = d/d delta  g(p + delta v), by the
    central difference of the hand-derived float64 gradient g along v, with one Richardson step:
        D(h) = [g(p + h v) - g(p - h v)] / 2h,   H v ~ (4 D(h) - D(2h)) / 3,
    truncation O(h^4), roundoff ~eps |g| / h. Cost: 4 oracle evaluations, whatever the size.
  - loss differences (any model; fuzzed bodies have no analytic gradient):
        (H v)_i = d/d eps_i  d/d delta  L(p + delta v + eps e_i), by the central mixed difference
        D(h) = [L(+hv, +he_i) - L(+hv, -he_i) - L(-hv, +he_i) + L(-hv, -he_i)] / (4 h^2)
    with the same Richardson step: truncation O(h^4), roundoff ~eps |L| / h^2. Cost: 8 forward
    passes per scalar input entry, so used on small cases. The step's stop_gradient outputs are
    held at their values at p (check/differentiation/finite_diff.py: frozen_at_base), as autodiff treats them.
Each oracle is also evaluated at a coarser step; where the two disagree the draw is ill-conditioned
and is skipped with a reason instead of being compared (rnnbench.check.verdicts.second_order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from rnnbench.check.differentiation.finite_diff import frozen_at_base, input_value
from rnnbench.model import Case, Model, reference_loss

LOSS_STEP = 2e-3
GRADIENT_STEP = 1e-3


def shifted(model: Model, case: Case, values: Mapping[str, np.ndarray]) -> Case:
    """The case with the inputs named in `values` replaced."""
    return dataclasses.replace(
        case,
        params={k: values.get(k, v) for k, v in case.params.items()},
        carry0=tuple(values.get(f"carry0.{n}", c) for n, c in zip(model.carry_names, case.carry0)),
        xs=values.get("xs", case.xs),
    )


def _base(model: Model, case: Case) -> dict[str, np.ndarray]:
    return {n: np.asarray(input_value(model, case, n), dtype=np.float64) for n in case.wrt_names(model.carry_names)}


def gradient_difference_hvp(
    model: Model, case: Case, v: Mapping[str, np.ndarray], step: float = GRADIENT_STEP
) -> dict[str, np.ndarray]:
    """H v from the model's analytic float64 oracle (model.oracle must exist)."""
    base = _base(model, case)

    def g(h: float) -> dict[str, np.ndarray]:
        return model.oracle(shifted(model, case, {n: base[n] + h * v[n] for n in base}))

    def d(h: float) -> dict[str, np.ndarray]:
        plus, minus = g(h), g(-h)
        return {n: (plus[n] - minus[n]) / (2 * h) for n in base}

    d1, d2 = d(step), d(2 * step)
    return {n: (4 * d1[n] - d2[n]) / 3 for n in base}


def finite_difference_hvp(
    model: Model, case: Case, v: Mapping[str, np.ndarray], step: float = LOSS_STEP
) -> dict[str, np.ndarray]:
    """H v from the numpy forward alone, for every input in case.wrt_names(); v keyed alike."""
    names = case.wrt_names(model.carry_names)
    base = _base(model, case)

    def loss_at(values: Mapping[str, np.ndarray]) -> float:
        return reference_loss(model, shifted(model, case, values))

    def mixed(h: float, name: str, idx: tuple) -> float:
        total = 0.0
        for sd, se in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
            values = {n: base[n] + sd * h * v[n] for n in names}
            values[name] = np.array(values[name], dtype=np.float64)  # 0-d inputs: an array, not a scalar
            values[name][idx] += se * h
            total += sd * se * loss_at(values)
        return total / (4 * h * h)

    out = {}
    with frozen_at_base(model, case):  # stop_gradient outputs held at the base (finite_diff.py)
        for name in names:
            hv = np.zeros_like(base[name])
            for idx in np.ndindex(base[name].shape):
                hv[idx] = (4 * mixed(step, name, idx) - mixed(2 * step, name, idx)) / 3
            out[name] = hv
    return out
