"""The float32 reference tape (check/low_precision.py) that sets the float32 rounding bound: it must
compute the right gradient, or its "rounding bound" would hide wrong ones. Generated from the
registry: every model with an exact oracle, and fuzzed bodies against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from rnnbench import registry
from rnnbench.check.low_precision import float32_gradients, rounding_bounds

EXACT = [n for n, m in registry.models().items() if m.oracle is not None and m.oracle_kind != "finite_differences"]


def _normwise(got: dict, want: dict) -> float:
    G = max(float(np.max(np.abs(w))) for w in want.values() if np.size(w))
    return max(float(np.max(np.abs(got[n] - want[n]))) / max(float(np.max(np.abs(want[n]))), 1e-3 * G)
               for n in want if np.size(want[n]))


@pytest.mark.parametrize("name", EXACT)
def test_float32_tape_matches_the_exact_oracle(name: str) -> None:
    """Within the float32 tolerance (1e-4 normwise) of the exact gradient, on the float32-rounded case."""
    model = registry.get_model(name)
    case = model.make_case(model.sizes_with_defaults({"T": 5, "K": 5}), 0).rounded_to("float32")
    exact = model.oracle(case)
    names = [n for n in case.wrt_names(model.carry_names) if n in exact]
    got = float32_gradients(model, case, names)
    assert _normwise(got, {n: exact[n] for n in names}) < 1e-4


def test_float32_tape_matches_finite_differences_on_fuzzed_bodies() -> None:
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.grammar import generate

    checked = 0
    for index in range(30):
        fc = build(generate(5, index), dtype="float32")
        if fc.ill_conditioned or not all(np.all(np.isfinite(fc.oracle.error_of(n))) for n in fc.oracle.grads):
            continue
        names = list(fc.oracle.grads)
        assert _normwise(float32_gradients(fc.model, fc.case, names), fc.oracle.grads) < 1e-3, fc.body.source()
        checked += 1
    assert checked >= 20


def test_rounding_bound_is_small_where_float32_is_well_conditioned() -> None:
    """On the rnn case the bound is ~10x float32 rounding (<= 1e-5 of scale), far below any bug measured."""
    model = registry.get_model("rnn")
    case = model.make_case(model.sizes_with_defaults({"T": 5}), 0).rounded_to("float32")
    exact = model.oracle(case)
    names = list(case.wrt_names(model.carry_names))
    bounds = rounding_bounds(model, case, names, exact)
    G = max(float(np.max(np.abs(exact[n]))) for n in names)
    assert max(float(np.max(b)) for b in bounds.values()) < 1e-5 * G
