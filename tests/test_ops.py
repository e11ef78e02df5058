"""The op namespaces: one typed vocabulary, complete in every framework, and the same numbers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rnnbench.ops import Ops, jax_ops, numpy_ops, torch_ops


def test_a_namespace_missing_an_op_fails_when_built() -> None:
    fields = {f.name: getattr(numpy_ops(), f.name) for f in dataclasses.fields(Ops)}
    del fields["cos"]
    with pytest.raises(TypeError, match="cos"):
        Ops(**fields)


def test_unstack_is_the_one_op_with_a_default() -> None:
    """A namespace without its own unstack (e.g. a tape over numpy) gets row-by-row indexing."""
    fields = {f.name: getattr(numpy_ops(), f.name) for f in dataclasses.fields(Ops) if f.name != "unstack"}
    rows = Ops(**fields).unstack(np.arange(6.0).reshape(3, 2))
    assert isinstance(rows, tuple) and len(rows) == 3
    np.testing.assert_array_equal(np.stack(rows), np.arange(6.0).reshape(3, 2))


def _framework_ops(name: str):
    pytest.importorskip(name)
    ops = {"torch": torch_ops, "jax": jax_ops}[name]()
    if name == "torch":
        import torch

        return ops, lambda a: torch.tensor(a, dtype=torch.float64), lambda t: t.detach().numpy()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return ops, lambda a: jnp.asarray(a, dtype=jnp.float64), np.asarray


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_every_op_agrees_with_numpy(framework: str) -> None:
    ops, put, get = _framework_ops(framework)
    ref = numpy_ops()
    rng = np.random.default_rng(0)
    x, w, b = rng.uniform(-2, 2, (3, 4)), rng.uniform(-1, 1, (5, 4)), rng.uniform(-1, 1, 5)
    pos, y = rng.uniform(0.1, 2, (3, 4)), rng.uniform(-2, 2, (3, 4))  # pos: in log's and sqrt's domain
    cases = {
        "tanh": lambda o, p: o.tanh(p(x)),
        "sigmoid": lambda o, p: o.sigmoid(p(x)),
        "exp": lambda o, p: o.exp(p(x)),
        "sin": lambda o, p: o.sin(p(x)),
        "cos": lambda o, p: o.cos(p(x)),
        "matmul": lambda o, p: o.matmul(p(x), p(w.T)),
        "linear": lambda o, p: o.linear(p(x), p(w), p(b)),
        "split": lambda o, p: o.stack(list(o.split(p(x), 2))),
        "concat": lambda o, p: o.concat([p(x), p(x)]),
        "sum": lambda o, p: o.sum(p(x)),
        "mean": lambda o, p: o.mean(p(x)) * o.ones_like(p(x)),
        "zeros": lambda o, p: o.zeros((2, 1), p(x)),
        "zeros_like": lambda o, p: o.zeros_like(p(x)),
        "ones_like": lambda o, p: o.ones_like(p(x)),
        "eye": lambda o, p: o.eye(3, p(x)),
        "transpose": lambda o, p: o.transpose(p(x)),
        "cast_like": lambda o, p: o.cast_like(p(x), p(w)),
        "tan": lambda o, p: o.tan(p(x) / 2),
        "log": lambda o, p: o.log(p(pos)),
        "sqrt": lambda o, p: o.sqrt(p(pos)),
        "abs": lambda o, p: o.abs(p(x)),
        "where": lambda o, p: o.where(p(x) > 0, p(x), p(y)) + o.where(p(y) < p(x), 0.5, p(y)),
        "maximum": lambda o, p: o.maximum(p(x), p(y)) + o.maximum(p(x), 0.25),
        "minimum": lambda o, p: o.minimum(p(x), p(y)) + o.minimum(0.25, p(x)),
        "broadcast_extrema": lambda o, p: o.maximum(p(b[:, None]), p(w)) - o.minimum(p(w), p(b[:, None])),
        "stop_gradient": lambda o, p: o.stop_gradient(p(x)),
        "reshape": lambda o, p: o.reshape(p(x), (2, 6)),
        "flip": lambda o, p: o.flip(p(x)),
        "concat_axis": lambda o, p: o.stack([o.concat([p(x), p(y)], axis=a) for a in (1, -1)]),
        "unstack": lambda o, p: o.stack([2.0 * r for r in o.unstack(p(x))]),
        "linear_full_bias": lambda o, p: o.linear(p(x), p(w), p(y @ w.T)),  # a (3, 5) b: one addmm in torch
    }
    untested = {f.name for f in dataclasses.fields(Ops)} - set(cases) - {"name", "stack", "fp32_island"}
    assert not untested, f"add a case for {untested}"
    for name, op in cases.items():
        np.testing.assert_allclose(get(op(ops, put)), op(ref, np.asarray), rtol=1e-14, atol=1e-15, err_msg=name)
    with ops.fp32_island():
        pass
