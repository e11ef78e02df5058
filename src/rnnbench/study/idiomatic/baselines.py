"""The idiomatic baselines, written as a user of each framework would (same loss, same inputs):
a fastrnns-style torch loop and a hand-written torch scan (each eager or compiled), a jax.jit
Python loop and jax.lax.scan of a fused cell. Each returns a Prepared, as a driver does."""

from __future__ import annotations

from typing import Any

from rnnbench.drivers.base import Prepared
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.drivers.torch import _compile as _torch_compile
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.model import Case, Model
from rnnbench.study.idiomatic.plan import DEVICE, DTYPE


def torch_unbind_loop(model: Model, case: Case, hoisted: bool, compiled: bool) -> Prepared:
    """fastrnns' shape: a Python loop over xs.unbind(0), the gates of a step in one addmm."""
    import torch
    import torch.nn.functional as F

    inputs, consts, wrt = _torch.model_tensors(model, case, DTYPE, DEVICE)
    wy, wh = consts["wy"], consts["wh"]
    lstm = model.kind == "lstm"

    def loss_fn(inputs):
        W_ih, W_hh, b, xs = inputs["W_ih"], inputs["W_hh"], inputs["b"], inputs["xs"]
        W_hh_t, W_ih_t = W_hh.t(), W_ih.t()
        if hoisted:
            xs = F.linear(xs, W_ih, b)  # (T, B, gates*H): every step's input projection in one matmul
        h = inputs["carry0.h"]
        c = inputs["carry0.c"] if lstm else None
        ys = []
        for x in xs.unbind(0):
            gates = torch.addmm(x if hoisted else torch.addmm(b, x, W_ih_t), h, W_hh_t)
            if lstm:
                i, f, g, o = gates.chunk(4, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
            else:
                h = torch.tanh(gates)
            ys.append(h)
        loss = (torch.stack(ys) * wy).sum() + (h * wh).sum()
        return loss + (c * consts["wc"]).sum() if lstm else loss

    settings: dict[str, Any] = {
        "loop": "for x in xs.unbind(0)",
        "cell": "one addmm a step",
        "input_projection": "hoisted" if hoisted else "in the cell",
    }
    if compiled:
        loss_fn, compile_settings = _torch_compile.compiled(loss_fn)
        settings.update(compile_settings)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings=settings)


def torch_hand_scan(model: Model, case: Case, compiled: bool) -> Prepared:
    """torch._higher_order_ops.scan called directly on a fused cell (one addmm a step, the input
    projection hoisted), as a user of scan writes it; y is cloned (scan forbids an output aliasing
    the carry). Compiled, the new carry is cloned too: torch 2.13.0's inductor refuses the documented
    form on these cells (registry: torch-inductor-scan-aliasing-saved-output-carry), as the
    torch_scan_compiled driver does."""
    import torch
    import torch.nn.functional as F
    from torch._higher_order_ops.scan import scan

    inputs, consts, wrt = _torch.model_tensors(model, case, DTYPE, DEVICE)
    wy, wh = consts["wy"], consts["wh"]
    lstm = model.kind == "lstm"

    def loss_fn(inputs):
        W_ih, W_hh, b = inputs["W_ih"], inputs["W_hh"], inputs["b"]
        xp, W_hh_t = F.linear(inputs["xs"], W_ih, b), W_hh.t()

        def cell(carry, x):
            gates = torch.addmm(x, carry[0], W_hh_t)
            if not lstm:
                h = torch.tanh(gates)
                return ((h.clone(),) if compiled else (h,)), h.clone()
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * carry[1] + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            return ((h.clone(), c.clone()) if compiled else (h, c)), h.clone()

        carry0 = (inputs["carry0.h"], inputs["carry0.c"]) if lstm else (inputs["carry0.h"],)
        carry, ys = scan(cell, carry0, xp)
        loss = (ys * wy).sum() + (carry[0] * wh).sum()
        return loss + (carry[1] * consts["wc"]).sum() if lstm else loss

    settings: dict[str, Any] = {
        "loop": "torch._higher_order_ops.scan(cell, carry0, xp)",
        "cell": "one addmm a step",
        "input_projection": "hoisted",
        "carry_cloned": compiled,
    }
    if compiled:
        loss_fn, compile_settings = _torch_compile.compiled(loss_fn)
        settings.update(compile_settings)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings=settings)


def jax_jit_loop(model: Model, case: Case, indexed: bool) -> Prepared:
    """A Python loop over the steps inside jax.jit (XLA sees the T steps unrolled), a fused cell,
    the input projection hoisted; the steps read as xp[t] (indexed) or from jnp.unstack(xp)."""
    import jax
    import jax.numpy as jnp

    diff, rest, consts = _jax.model_arrays(model, case, DTYPE, DEVICE)
    lstm = model.kind == "lstm"

    def loss_fn(diff, rest):
        p = {**diff, **rest}
        xp, W_hh_t = p["xs"] @ p["W_ih"].T + p["b"], p["W_hh"].T
        h, c = p["carry0.h"], (p["carry0.c"] if lstm else None)
        ys = []
        for x in [xp[t] for t in range(xp.shape[0])] if indexed else jnp.unstack(xp):
            gates = x + h @ W_hh_t
            if lstm:
                i, f, g, o = jnp.split(gates, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
            else:
                h = jnp.tanh(gates)
            ys.append(h)
        loss = jnp.sum(jnp.stack(ys) * consts["wy"]) + jnp.sum(h * consts["wh"])
        return loss + jnp.sum(c * consts["wc"]) if lstm else loss

    return _jax.prepared_from_loss(
        loss_fn,
        diff,
        rest,
        {
            "loop": "python loop under jax.jit, " + ("xp[t]" if indexed else "jnp.unstack(xp)"),
            "cell": "one matmul a step",
            "input_projection": "hoisted",
        },
    )


def jax_lax_scan(model: Model, case: Case, hoisted: bool, unroll: int) -> Prepared:
    """jax.lax.scan of a fused cell (one matmul for all gates of a step), with `unroll`."""
    import jax
    import jax.numpy as jnp

    diff, rest, consts = _jax.model_arrays(model, case, DTYPE, DEVICE)
    lstm = model.kind == "lstm"

    def loss_fn(diff, rest):
        p = {**diff, **rest}
        W_ih, W_hh, b = p["W_ih"], p["W_hh"], p["b"]

        def cell(carry, x):
            gates = (x if hoisted else x @ W_ih.T + b) + carry[0] @ W_hh.T
            if not lstm:
                h = jnp.tanh(gates)
                return (h,), h
            i, f, g, o = jnp.split(gates, 4, axis=-1)
            c = jax.nn.sigmoid(f) * carry[1] + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        xs = p["xs"] @ W_ih.T + b if hoisted else p["xs"]
        carry0 = (p["carry0.h"], p["carry0.c"]) if lstm else (p["carry0.h"],)
        carry, ys = jax.lax.scan(cell, carry0, xs, unroll=unroll)
        loss = jnp.sum(ys * consts["wy"]) + jnp.sum(carry[0] * consts["wh"])
        return loss + jnp.sum(carry[1] * consts["wc"]) if lstm else loss

    return _jax.prepared_from_loss(
        loss_fn,
        diff,
        rest,
        {
            "loop": f"lax.scan(unroll={unroll})",
            "cell": "one matmul a step",
            "input_projection": "hoisted" if hoisted else "in the cell",
        },
    )
