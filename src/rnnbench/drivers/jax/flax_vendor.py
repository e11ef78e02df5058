"""Mechanism: flax's vendor recurrent cells (anchors) in nn.RNN, on the canonical parameters:
nn.OptimizedLSTMCell for the LSTM, nn.SimpleCell (tanh) for the Elman RNN and nn.GRUCell for the GRU. The mapping to
flax's layout is done inside the differentiated function, so jax returns canonical gradients.

Layouts:
- LSTM: for gate q in (i, f, g, o), rows q*H:(q+1)*H of W_ih / W_hh / b become cell/i<q>/kernel
  (transposed, no bias), cell/h<q>/kernel (transposed) and cell/h<q>/bias. flax's carry is (c, h);
  canonical is (h, c).
- SimpleCell: cell/i/kernel = W_ih.T, cell/i/bias = b, cell/h/kernel = W_hh.T (no bias).
- GRUCell: for gate q in (r, z, n), rows q*H:(q+1)*H of W_ih / W_hh become cell/i<q>/kernel and
  cell/h<q>/kernel (transposed). flax has one bias where torch.nn.GRU adds two: cell/ir/bias and
  cell/iz/bias are b_ih + b_hh of their gate (summed inside the gate either way), cell/in/bias is
  b_ih's n rows and cell/hn/bias b_hh's (inside r * (W_hn h + b_hn)); jax's gradient of the sums
  gives each canonical bias its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rnnbench.drivers.base import Batch, Prepared, anchor, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.model import Case, Model
from rnnbench.ops import jax_ops


def flax_lstm_params(p: dict, H: int) -> dict:
    params = {}
    for q, gate in enumerate("ifgo"):
        rows = slice(q * H, (q + 1) * H)
        params[f"i{gate}"] = {"kernel": p["W_ih"][rows].T}
        params[f"h{gate}"] = {"kernel": p["W_hh"][rows].T, "bias": p["b"][rows]}
    return {"params": {"cell": params}}


def flax_gru_params(p: dict, H: int) -> dict:
    params = {}
    for q, gate in enumerate("rzn"):
        rows = slice(q * H, (q + 1) * H)
        b_i, b_h = p["b_ih"][rows], p["b_hh"][rows]
        params[f"i{gate}"] = {"kernel": p["W_ih"][rows].T, "bias": b_i if gate == "n" else b_i + b_h}
        params[f"h{gate}"] = {"kernel": p["W_hh"][rows].T, **({"bias": b_h} if gate == "n" else {})}
    return {"params": {"cell": params}}


def flax_simple_params(p: dict, H: int) -> dict:
    return {"params": {"cell": {"i": {"kernel": p["W_ih"].T, "bias": p["b"]}, "h": {"kernel": p["W_hh"].T}}}}


@dataclass(frozen=True)
class Cell:
    kind: str  # the model family it computes (Model.kind)
    cell: str  # the flax.linen class
    variables: Callable[[dict, int], dict]  # canonical params, H -> flax variables
    flax_carry_order: tuple[int, ...]  # canonical carry indices in flax's carry order
    label: str


def prepare(cell: Cell, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import flax.linen as nn

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    H = case.params["W_hh"].shape[1]
    layer = nn.RNN(getattr(nn, cell.cell)(features=H), time_major=True, return_carry=True)
    ops = jax_ops()
    order = cell.flax_carry_order

    def to_flax(carry: tuple) -> Any:
        return tuple(carry[i] for i in order) if len(order) > 1 else carry[0]

    def from_flax(carry: Any) -> tuple:
        leaves = carry if len(order) > 1 else (carry,)
        return tuple(leaves[order.index(i)] for i in range(len(order)))

    def loss_fn(diff, rest):
        p, carry0, xs = unflatten(model, case, {**diff, **rest})
        carry_T, ys = layer.apply(cell.variables(p, H), xs, initial_carry=to_flax(carry0))
        return model.loss(ops, consts, ys, from_flax(carry_T))

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"layer": cell.label}, batch=Batch(model, case, consts))


DRIVERS = tuple(
    anchor(name, _jax.FLAX, summary, prepare=prepare, layer=cell, **_jax.ROW_FIELDS)
    for name, summary, cell in (
        (
            "flax_lstm_cell",
            "anchor: flax nn.RNN(OptimizedLSTMCell)",
            Cell(
                "lstm",
                cell="OptimizedLSTMCell",
                variables=flax_lstm_params,
                flax_carry_order=(1, 0),
                label="flax.linen.RNN(OptimizedLSTMCell)",
            ),
        ),
        (
            "flax_simple_cell",
            "anchor: flax nn.RNN(SimpleCell)",
            Cell(
                "elman_tanh",
                cell="SimpleCell",
                variables=flax_simple_params,
                flax_carry_order=(0,),
                label="flax.linen.RNN(SimpleCell)",
            ),
        ),
        (
            "flax_gru_cell",
            "anchor: flax nn.RNN(GRUCell)",
            Cell(
                "gru", cell="GRUCell", variables=flax_gru_params, flax_carry_order=(0,), label="flax.linen.RNN(GRUCell)"
            ),
        ),
    )
)
