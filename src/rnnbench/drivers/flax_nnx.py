"""Mechanism: flax NNX, flax's current module API (flax.linen's rows are drivers/flax_vendor.py and
drivers/flax_scan.py), on the canonical parameters.

Configurations (rows of DRIVERS):
- flax_nnx_lstm_cell (anchor): nnx.RNN(nnx.LSTMCell). Its layout is flax.linen's LSTM cell's
  (drivers/flax_vendor.py, flax_lstm_params: ii/if_/ig/io kernels without bias, h* kernels with
  one; nnx names the forget input kernel if_); its carry is (c, h), canonical is (h, c). The
  module is split once (nnx.split) and merged inside the differentiated function from a pure dict
  built from the canonical parameters (nnx.replace_by_pure_dict), so jax returns canonical
  gradients. Merging inside the traced function is also what keeps these rows clear of flax#4771
  (jax.grad through a module closed over from outside the trace raises).
- flax_nnx_scan: the model's step lifted with nnx.scan (carry, broadcast parameters, scanned xs).

nnx.GRUCell has no row: its hidden projection has no bias (n = tanh(x_n + r * (W_hn h))), so it
cannot compute the gru model's r * (W_hn h + b_hn) for a nonzero b_hn.
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.drivers import _jax
from rnnbench.drivers.base import Driver, Prepared, anchor, unflatten
from rnnbench.drivers.flax_vendor import flax_lstm_params
from rnnbench.model import BY_PRECISION, Case, Model, run_forward, scan_inputs
from rnnbench.ops import jax_ops


@dataclass(frozen=True)
class Cell:
    kind: str  # the model family it computes (Model.kind)
    label: str  # recorded as the row's settings["layer"]


def prepare_cell(cell: Cell, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax.numpy as jnp
    from flax import nnx

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    I, H = case.params["W_ih"].shape[1], case.params["W_hh"].shape[1]
    rnn = nnx.RNN(
        nnx.LSTMCell(I, H, rngs=nnx.Rngs(0), param_dtype=getattr(jnp, dtype)), time_major=True, return_carry=True
    )
    graphdef, state = nnx.split(rnn)
    ops = jax_ops()

    def loss_fn(diff, rest):
        p, (h0, c0), xs = unflatten(model, case, {**diff, **rest})
        pure = state.to_pure_dict()
        cell_params = flax_lstm_params(p, H)["params"]["cell"]
        pure["cell"] = {("if_" if k == "if" else k): v for k, v in cell_params.items()}  # nnx: if_, linen: if
        layer_state = nnx.State(state)
        nnx.replace_by_pure_dict(layer_state, pure)
        (c_T, h_T), ys = nnx.merge(graphdef, layer_state)(xs, initial_carry=(c0, h0))
        return model.loss(ops, consts, ys, (h_T, c_T))

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"layer": cell.label})


def prepare_scan(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    from flax import nnx

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    run_model, projection = _jax.input_projection(model, case, dtype)

    def recur(step, params, carry0, xs, length):
        # nnx.scan needs something to scan over: a trip-count recurrence scans a dummy
        xs, step_x = scan_inputs(ops, xs, length, like=carry0[0])

        @nnx.scan(in_axes=(nnx.Carry, None, 0), out_axes=(nnx.Carry, 0), length=length)
        def scanned(carry, params, x):
            return step(ops, params, carry, step_x(x))

        carry, ys = scanned(tuple(carry0), params, xs)
        return ys, carry

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        ys, carry = run_forward(ops, run_model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
        return model.loss(ops, consts, ys, carry)

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"flax": "nnx.scan", **projection})


DRIVERS = (
    anchor(
        "flax_nnx_lstm_cell",
        _jax.FLAX,
        "anchor: flax nnx.RNN(nnx.LSTMCell)",
        prepare=prepare_cell,
        layer=Cell("lstm", "flax.nnx.RNN(LSTMCell)"),
        **_jax.ROW_FIELDS,
    ),
    Driver(
        "flax_nnx_scan",
        _jax.FLAX,
        "flax nnx.scan of the model's step",
        prepare_scan,
        dtypes=BY_PRECISION,
        **_jax.ROW_FIELDS,
    ),
)
