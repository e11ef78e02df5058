"""float64 finite-difference Hessian-vector products of a model's numpy forward: the second-order
oracle that shares no engine with any driver.

(H v)_i = d/d eps_i  d/d delta  L(p + delta v + eps e_i), by the central mixed difference
    D(h) = [L(+hv, +he_i) - L(+hv, -he_i) - L(-hv, +he_i) + L(-hv, -he_i)] / (4 h^2)
with one Richardson step, (4 D(h) - D(2h)) / 3: truncation O(h^4), roundoff ~eps |L| / h^2.
Cost: 8 forward passes per scalar input entry; used on small (fuzzed) cases.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from rnnbench.check.finite_diff import input_value
from rnnbench.model import Case, Model, reference_loss

STEP = 2e-3


def _loss_at(model: Model, case: Case, values: Mapping[str, np.ndarray]) -> float:
    params = {k: values.get(k, v) for k, v in case.params.items()}
    carry0 = tuple(values.get(f"carry0.{n}", c) for n, c in zip(model.carry_names, case.carry0))
    return reference_loss(model, case, params=params, carry0=carry0, xs=values.get("xs", case.xs))


def finite_difference_hvp(model: Model, case: Case, v: Mapping[str, np.ndarray], step: float = STEP) -> dict[str, np.ndarray]:
    """H v for the Hessian of the loss w.r.t. every input in case.wrt_names(); v keyed alike."""
    names = case.wrt_names(model.carry_names)
    base = {n: np.asarray(input_value(model, case, n), dtype=np.float64) for n in names}

    def mixed(h: float, name: str, idx: tuple) -> float:
        total = 0.0
        for sd, se in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
            values = {n: base[n] + sd * h * v[n] for n in names}
            values[name] = values[name].copy()
            values[name][idx] += se * h
            total += sd * se * _loss_at(model, case, values)
        return total / (4 * h * h)

    out = {}
    for name in names:
        hv = np.zeros_like(base[name])
        for idx in np.ndindex(base[name].shape):
            hv[idx] = (4 * mixed(step, name, idx) - mixed(2 * step, name, idx)) / 3
        out[name] = hv
    return out
