"""float64 central finite differences of a model's numpy forward: the oracle that assumes nothing.

5-point stencil f'(x) ~ (-f(x+2h) + 8 f(x+h) - 8 f(x-h) + f(x-2h)) / 12h, truncation O(h^4).
Cost: 4 forward passes per scalar entry, so use it on small sizes.
"""

from __future__ import annotations

import numpy as np

from rnnbench.model import Case, Model, reference_loss
from rnnbench.status import OracleKind

STEP = 1e-3


def _loss_with(model: Model, case: Case, name: str, value: np.ndarray) -> float:
    if name == "xs":
        return reference_loss(model, case, xs=value)
    if name.startswith("carry0."):
        leaf = model.carry_names.index(name.split(".", 1)[1])
        carry0 = tuple(value if i == leaf else c for i, c in enumerate(case.carry0))
        return reference_loss(model, case, carry0=carry0)
    return reference_loss(model, case, params={**case.params, name: value})


def input_value(model: Model, case: Case, name: str) -> np.ndarray:
    if name == "xs":
        return case.xs
    if name.startswith("carry0."):
        return case.carry0[model.carry_names.index(name.split(".", 1)[1])]
    return case.params[name]


def finite_difference_grads(model: Model, case: Case, step: float = STEP, names=None) -> dict[str, np.ndarray]:
    """d loss / d input for every input in `names` (default: case.wrt_names()), by finite differences."""
    grads = {}
    for name in case.wrt_names(model.carry_names) if names is None else names:
        base = np.asarray(input_value(model, case, name), dtype=np.float64)
        grad = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            f = []
            for k in (2, 1, -1, -2):
                x = base.copy()
                x[idx] += k * step
                f.append(_loss_with(model, case, name, x))
            grad[idx] = (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * step)
        grads[name] = grad
    return grads


def oracle_grads(model: Model, case: Case) -> tuple[dict[str, np.ndarray], str]:
    """(gradients of every compared input, oracle kind). A model's oracle may cover only some
    inputs (e.g. a variant whose initial carry is differentiated where its base's is not): finite
    differences of the model itself fill the rest, and then the kind is finite_differences, whose
    tolerance holds for every entry."""
    grads = dict(model.oracle(case)) if model.oracle is not None else {}
    missing = [n for n in case.wrt_names(model.carry_names) if n not in grads]
    if missing:
        grads.update(finite_difference_grads(model, case, names=missing))
        return grads, OracleKind.FINITE_DIFFERENCES
    return grads, model.oracle_kind
