"""The float32 reference tape (check/differentiation/low_precision.py) that sets the float32 rounding bound: it must
compute the right gradient, or its "rounding bound" would hide wrong ones. Generated from the
registry: every model with an exact oracle, and fuzzed bodies against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from rnnbench import registry
from rnnbench.check.differentiation.low_precision import float32_gradients, rounding_bounds

EXACT = [n for n, m in registry.models().items() if m.oracle is not None and m.oracle_kind != "finite_differences"]


def _normwise(got: dict, want: dict) -> float:
    G = max(float(np.max(np.abs(w))) for w in want.values() if np.size(w))
    return max(
        float(np.max(np.abs(got[n] - want[n]))) / max(float(np.max(np.abs(want[n]))), 1e-3 * G)
        for n in want
        if np.size(want[n])
    )


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


def _vjp_cases(rng: np.random.Generator) -> dict:
    """name -> (f(ops, *inputs), inputs): every differentiable op of Ops on a small random input,
    away from kinks (abs at 0) and inside the domains (log, sqrt of positive values)."""
    x, y = rng.uniform(-1.2, 1.2, (3, 4)), rng.uniform(-1.2, 1.2, (3, 4))
    pos, w, b, row = (
        rng.uniform(0.2, 2.0, (3, 4)),
        rng.uniform(-1, 1, (5, 4)),
        rng.uniform(-1, 1, 5),
        rng.uniform(-1, 1, 4),
    )
    tied = np.where(rng.uniform(size=(3, 4)) < 0.5, x, y)  # equal to x in about half the entries
    return {
        "tanh": (lambda o, a: o.tanh(a), (x,)),
        "sigmoid": (lambda o, a: o.sigmoid(a), (x,)),
        "exp": (lambda o, a: o.exp(a), (x,)),
        "sin": (lambda o, a: o.sin(a), (x,)),
        "cos": (lambda o, a: o.cos(a), (x,)),
        "tan": (lambda o, a: o.tan(a), (x,)),
        "log": (lambda o, a: o.log(a), (pos,)),
        "sqrt": (lambda o, a: o.sqrt(a), (pos,)),
        "abs": (lambda o, a: o.abs(a), (x,)),
        "where": (
            lambda o, a, c, r: (
                o.where(a > 0, a * c, r) + o.where(0 < c, 0.5, a) + o.where(a >= c, c, a * a) + o.where(c <= r, r, c)
            ),
            (x, y, row),
        ),
        "maximum": (lambda o, a, c, r: o.maximum(a, c) + o.maximum(a, 0.25) + o.maximum(r, a), (x, tied, row)),
        "minimum": (lambda o, a, c, r: o.minimum(a, c) + o.minimum(0.25, a) + o.minimum(a, r), (x, tied, row)),
        "stop_gradient": (lambda o, a: a * o.stop_gradient(a) + o.stop_gradient(o.exp(a)), (x,)),
        "matmul": (lambda o, a, m: o.matmul(a, o.transpose(m)), (x, w)),
        "linear": (lambda o, a, m, c: o.linear(a, m, c), (x, w, b)),
        "split": (lambda o, a: o.concat(list(o.split(a, 2))), (x,)),
        "stack": (lambda o, a, c: o.stack([a, c * a]), (x, y)),
        "sum": (lambda o, a: o.sum(a * a), (x,)),
        "mean": (lambda o, a: a * o.mean(a * a), (x,)),
        "transpose": (lambda o, a: o.transpose(a), (x,)),
        "reshape": (lambda o, a: o.reshape(a, (2, 6)), (x,)),
        "flip": (lambda o, a: o.flip(a * o.sin(a)), (x,)),
        "unstack": (lambda o, a: o.stack([row * (i + 1.0) for i, row in enumerate(o.unstack(a * a))]), (x,)),
        "concat": (lambda o, a, c: o.concat([a, c * c]), (x, y)),
        "concat_axis1": (lambda o, a, c: o.concat([a, c * c, a], axis=1), (x, y)),
        "concat_axis-1": (lambda o, a, c: o.concat([c * a, c], axis=-1), (x, y)),
    }


def test_every_float32_tape_vjp_agrees_with_float64_autograd() -> None:
    """Each op's vector-Jacobian product on the tape, against torch autograd at float64 on the same
    float32-rounded inputs and cotangent: a wrong vjp would give wrong rounding bounds."""
    import dataclasses

    torch = pytest.importorskip("torch")
    from rnnbench.check.differentiation.low_precision import Var, backward, float32_ops
    from rnnbench.ops import Ops, torch_ops

    rng = np.random.default_rng(3)
    cases = _vjp_cases(rng)
    no_input_gradient = {"name", "zeros", "zeros_like", "ones_like", "eye", "cast_like", "fp32_island"}
    untested = {f.name for f in dataclasses.fields(Ops)} - no_input_gradient - {n.split("_axis")[0] for n in cases}
    assert not untested, f"add a vjp case for {untested}"
    for name, (f, inputs) in cases.items():
        inputs = [np.asarray(a, np.float32).astype(np.float64) for a in inputs]
        leaves = [Var(a) for a in inputs]
        out = f(float32_ops(), *leaves)
        assert out.dtype == np.float32, name
        cot = rng.uniform(-1, 1, out.shape).astype(np.float32)
        backward(float32_ops().sum(out * cot))
        tensors = [torch.tensor(a, requires_grad=True) for a in inputs]
        want_out = f(torch_ops(), *tensors)
        (want_out * torch.tensor(cot, dtype=torch.float64)).sum().backward()
        np.testing.assert_allclose(out.value, want_out.detach().numpy(), rtol=1e-6, atol=1e-6, err_msg=name)
        for i, (leaf, t) in enumerate(zip(leaves, tensors)):
            want = t.grad.numpy()
            got = np.zeros_like(want) if leaf.grad is None else leaf.grad
            np.testing.assert_allclose(
                got, want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max()), err_msg=f"{name}: input {i}"
            )


def test_comparisons_on_the_tape_are_plain_boolean_masks() -> None:
    from rnnbench.check.differentiation.low_precision import Var

    x = Var(np.array([-1.0, 0.0, 2.0]))
    for mask, want in (
        (x > 0, [False, False, True]),
        (x < 0, [True, False, False]),
        (x >= 0, [False, True, True]),
        (x <= 0, [True, True, False]),
        (np.zeros(3) < x, [False, False, True]),
    ):
        assert isinstance(mask, np.ndarray) and mask.dtype == bool
        np.testing.assert_array_equal(mask, want)
