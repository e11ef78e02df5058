"""Integer leaves through check_recurrence: token ids in xs index an embedding (E[tok]) and an
integer carry leaf counts, on every driver and in the oracle, kept integer (never rounded, never
differentiated); the report names them. A planted wrong gradient on E is caught; xs mixing integer
and float leaves, and a step that turns an integer carry leaf into a float, are refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rnnbench
from rnnbench import registry
from rnnbench.errors import InputError
from rnnbench.status import WRONG_GRADIENT, Status, is_known
from tests.conftest import compile_marks

V, D, H, B, T = 7, 3, 4, 2, 5


def _problem(per_step: tuple = (B,)):
    rng = np.random.default_rng(0)
    params = {"E": rng.normal(size=(V, D)), "W": rng.normal(size=(D, H)), "U": rng.normal(size=(H, H))}
    params = {k: 0.5 * v for k, v in params.items()}
    tokens = rng.integers(0, V, size=(T, *per_step), dtype=np.int64)
    return params, (np.zeros((*per_step, H)),), tokens


def lm_step(ops, p, carry, tok):
    """A recurrent language model's step: h' = tanh(E[tok] @ W + h @ U)."""
    (h,) = carry
    h = ops.tanh(p["E"][tok] @ p["W"] + h @ p["U"])
    return (h,), h


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_language_model_step_on_every_default_driver(dtype: str) -> None:
    params, carry0, tokens = _problem()
    # one loss form: an integer leaf's path into the step does not depend on it (the forms have their own tests)
    report = rnnbench.check_recurrence(
        lm_step, params, carry0, xs=tokens, dtype=dtype, xs_requires_grad=True, losses=["weighted"]
    )
    ran = [r for r in report.results if r.status != Status.UNAVAILABLE]
    assert {r.driver for r in ran} >= {"torch_loop", "torch_scan", "jax_loop", "jax_lax_scan", "flax_scan"}
    # ok, or a registered upstream issue (eager torch scan's double backward, any step)
    assert report.as_registered and all(r.status == Status.OK or is_known(r.status) for r in ran), str(report)
    assert all(r.status == Status.OK for r in ran if not r.driver.startswith(("torch_scan", "torch_while_loop"))), str(
        report
    )
    assert report.integer == ("xs",)
    assert "integer leaves (indices; kept integer, no gradient by definition): xs" in str(report)


def _all_drivers():
    """(driver, dtype) for every driver: an inductor driver and a bug-class configuration at float64 only (an
    integer leaf's path into the step does not depend on the float dtype; every compiled driver meets float32 in
    the gradient matrix, and a bug-class configuration differs from its core row in the mechanism, not the dtype)."""
    return [
        pytest.param(name, dtype, marks=compile_marks(name), id=f"{name}-{dtype}")
        for name, driver in registry.drivers().items()
        for dtype in (("float64",) if driver.slow_to_compile or driver.suite == "bugs" else ("float64", "float32"))
    ]


@pytest.mark.parametrize(("driver", "dtype"), _all_drivers())
def test_a_language_model_step_on_each_driver(driver: str, dtype: str) -> None:
    """drivers="all", one driver at a time: ok, a registered upstream issue, or unavailable with its
    reason (the associative scans: the step declares no linear recurrence). One loss form: the integer
    leaf's path does not depend on it (the loss forms have their own tests), and each is a compile."""
    params, carry0, tokens = _problem()
    report = rnnbench.check_recurrence(
        lm_step, params, carry0, xs=tokens, dtype=dtype, drivers=[driver], order=1, losses=["weighted"]
    )
    for r in report.results:
        assert r.status in (Status.OK, Status.UNAVAILABLE) or is_known(r.status), str(report)


def test_one_token_per_step_on_the_loops_and_jax_scans() -> None:
    """A 0-d token per step (xs (T,)): E[tok] is a row of E. Runs on the loops and the jax scans;
    torch's dynamo-traced scan cannot index with a 0-d integer tensor (docs/api.md)."""
    params, carry0, tokens = _problem(per_step=())
    drivers = ["torch_loop", "jax_loop", "jax_lax_scan", "flax_scan"]
    report = rnnbench.check_recurrence(lm_step, params, carry0, xs=tokens, drivers=drivers)
    assert report.ok, str(report)


class _WrongEmbedding(torch.autograd.Function):
    """E[tok] whose backward doubles E's gradient: a planted wrong derivative."""

    @staticmethod
    def forward(ctx, E, tok):
        ctx.save_for_backward(tok)
        ctx.rows = E.shape[0]
        return E[tok]

    @staticmethod
    def backward(ctx, g):
        (tok,) = ctx.saved_tensors
        rows = g.reshape(-1, g.shape[-1])
        grad = torch.zeros((ctx.rows, g.shape[-1]), dtype=g.dtype).index_add_(0, tok.reshape(-1), rows)
        return 2.0 * grad, None


def _jax_wrong_embedding():
    import jax

    @jax.custom_vjp
    def lookup(E, tok):
        return E[tok]

    def fwd(E, tok):
        return E[tok], (E.shape, tok)

    def bwd(res, g):
        shape, tok = res
        import jax.numpy as jnp

        grad = jnp.zeros(shape, g.dtype).at[tok].add(g)
        return 2.0 * grad, None

    lookup.defvjp(fwd, bwd)
    return lookup


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("planted", ["torch", "jax", None])
def test_a_planted_wrong_gradient_on_the_embedding_is_caught(planted: str | None, dtype: str) -> None:
    jax_lookup = _jax_wrong_embedding()

    def step(ops, p, carry, tok):
        (h,) = carry
        if ops.name == planted == "torch":
            e = _WrongEmbedding.apply(p["E"], tok)
        elif ops.name == planted == "jax":
            e = jax_lookup(p["E"], tok)
        else:
            e = p["E"][tok]
        h = ops.tanh(e @ p["W"] + h @ p["U"])
        return (h,), h

    params, carry0, tokens = _problem()
    drivers = ["torch_loop", "jax_loop", "jax_lax_scan"]
    report = rnnbench.check_recurrence(step, params, carry0, xs=tokens, dtype=dtype, drivers=drivers, order=1)
    for r in report.results:
        framework = "torch" if r.driver.startswith("torch") else "jax"
        if framework == planted:
            assert r.status in WRONG_GRADIENT, str(report)
            assert any(e.name == "E" and e.status != "ok" for e in r.grad_errors), str(report)
        else:
            assert r.status == Status.OK, str(report)


def counter_step(ops, p, carry, x):
    """An integer carry leaf: a step counter that scales the input, kept integer."""
    h, n = carry
    h = ops.tanh(p["w"] * h + x * (n + 1))
    return (h, n + 1), h


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_integer_carry_leaf_stays_integer(dtype: str) -> None:
    xs = np.random.default_rng(1).uniform(-1, 1, (4, 2))
    carry0 = (np.zeros(2), np.zeros((), dtype=np.int64))
    report = rnnbench.check_recurrence(
        counter_step,
        {"w": np.array([0.5, -0.3])},
        carry0,
        xs=xs,
        dtype=dtype,
        carry0_requires_grad=True,  # covers the counter too: it has none, and the report says why
        drivers=["torch_loop", "torch_scan", "jax_loop", "jax_lax_scan", "flax_scan"],
    )
    # torch's scan autograd cannot carry an integer leaf (it asserts on the tangent count): unavailable,
    # with that reason; every other driver runs the counter
    scan = [r for r in report.results if r.driver == "torch_scan"]
    assert [r.report for r in scan] == [
        "torch scan's autograd cannot carry an integer leaf (carry0.c1): it asserts on the tangent count"
    ]
    assert report.ok, str(report)
    assert report.integer == ("carry0[1]",)
    assert all(e.name != "carry0.c1" for r in report.results for e in r.grad_errors)


def test_xs_mixing_integer_and_float_leaves_is_refused_in_one_line() -> None:
    params, carry0, tokens = _problem()
    with pytest.raises(InputError, match=r"xs mixes integer leaves \(xs\['tok'\]\) with float leaves \(xs\['u'\]\)"):
        rnnbench.check_recurrence(lm_step, params, carry0, xs={"tok": tokens, "u": np.ones((T, B))})


def test_a_step_turning_an_integer_carry_leaf_into_a_float_is_refused() -> None:
    def step(ops, p, carry, x):
        h, n = carry
        return (ops.tanh(p["w"] * h + x), n + 0.5), h

    with pytest.raises(InputError, match=r"carry\[1\] is an array of dtype float64 but carry0's leaf is an integer"):
        rnnbench.check_recurrence(
            step, {"w": np.array([0.5])}, (np.zeros(1), np.zeros((), np.int64)), xs=np.ones((3, 1))
        )
