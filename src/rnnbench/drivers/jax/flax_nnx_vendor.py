"""Mechanism: flax NNX's vendor recurrent cell (anchor), nnx.RNN(nnx.LSTMCell), on the canonical
parameters (flax.linen's cells are drivers/jax/flax_vendor.py).

Layout: flax.linen's LSTM cell's (drivers/jax/flax_vendor.py, flax_lstm_params: ii/if_/ig/io kernels
without bias, h* kernels with one; nnx names the forget input kernel if_); its carry is (c, h),
canonical is (h, c). The module is split once (nnx.split) and merged inside the differentiated
function from a pure dict built from the canonical parameters (nnx.replace_by_pure_dict), so jax
returns canonical gradients. Merging inside the traced function is also what keeps these rows clear
of flax#4771 (jax.grad through a module closed over from outside the trace raises).

nnx.GRUCell has no row: its hidden projection has no bias (n = tanh(x_n + r * (W_hn h))), so it
cannot compute the gru model's r * (W_hn h + b_hn) for a nonzero b_hn.
"""

from __future__ import annotations

from dataclasses import dataclass

from rnnbench.drivers.base import Batch, Prepared, anchor, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.drivers.jax.flax_vendor import flax_lstm_params
from rnnbench.model import Case, Model
from rnnbench.ops import jax_ops


@dataclass(frozen=True)
class Cell:
    kind: str  # the model family it computes (Model.kind)
    label: str  # recorded as the row's settings["layer"]


def prepare(cell: Cell, model: Model, case: Case, dtype: str, device: str) -> Prepared:
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

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"layer": cell.label}, batch=Batch(model, case, consts))


DRIVERS = (
    anchor(
        "flax_nnx_lstm_cell",
        _jax.FLAX,
        "anchor: flax nnx.RNN(nnx.LSTMCell)",
        prepare=prepare,
        layer=Cell("lstm", "flax.nnx.RNN(LSTMCell)"),
        **_jax.ROW_FIELDS,
    ),
)
