"""Mechanism: torch's vendor recurrent layers (anchors), torch.nn.LSTM, torch.nn.RNN(tanh) and
torch.nn.GRU, on the canonical parameters. The model's own step is not used: these rows show how far the model's
step + loop are from the framework's hand-written layer, and check the layer's gradients too.

Layout: weight_ih_l0 = W_ih, weight_hh_l0 = W_hh (LSTM gate order i, f, g, o, as canonical),
bias_ih_l0 = b; bias_hh_l0 is held at zero without grad where the canonical model has one bias
(rnn, lstm); the GRU has both (b_ih, b_hh: its reset gate multiplies W_hn h + b_hn alone).
torch carries (h, c) as (1, B, H) per layer; canonical carries are (B, H).

Compiled rows (`torch_nn_lstm_compiled`, `torch_nn_gru_compiled`): torch.compile (inductor) of the
same loss with torch._dynamo.config.allow_rnn set for the compile only (dynamo graph-breaks on an
RNN module without it; fullgraph makes that an error). allow_rnn is off by default in torch: its
default flip (pytorch#185163, for #158007) was reverted for speed (#185902).

Dtypes: float64 and float32 run everywhere; any other (bfloat16) is decided by trying the layer
once per process and device (try_dtype): cuDNN's support depends on the GPU, the CPU kernels' on
the build, and a static list would be wrong on one of them.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from rnnbench.drivers.base import Batch, Prepared, anchor
from rnnbench.drivers.torch import _compile as _torch_compile
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.model import Case, Model
from rnnbench.ops import torch_ops


@dataclass(frozen=True)
class Layer:
    kind: str  # the model family it computes (Model.kind)
    module: str  # the torch.nn class
    gates: int  # rows of W_ih per hidden unit
    options: tuple[tuple[str, str], ...] = ()  # constructor keywords
    biases: tuple[str, ...] = ("b",)  # canonical names of bias_ih_l0 and, where given, bias_hh_l0
    compiled: bool = False  # torch.compile (inductor) of the loss, allow_rnn on for the compile

    @property
    def label(self) -> str:  # recorded as the row's settings["layer"]
        return f"torch.nn.{self.module}"


def prepare(layer: Layer, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import torch

    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    rows, I = case.params["W_ih"].shape
    H = rows // layer.gates
    module = getattr(torch.nn, layer.module)(I, H, **dict(layer.options)).to(
        device=device, dtype=_torch.torch_dtype(dtype)
    )
    b_ih, *b_hh = layer.biases
    with torch.no_grad():
        module.weight_ih_l0.copy_(inputs["W_ih"])
        module.weight_hh_l0.copy_(inputs["W_hh"])
        module.bias_ih_l0.copy_(inputs[b_ih])
        if b_hh:
            module.bias_hh_l0.copy_(inputs[b_hh[0]])
        else:
            module.bias_hh_l0.zero_()
    module.bias_hh_l0.requires_grad_(bool(b_hh))
    inputs.update({"W_ih": module.weight_ih_l0, "W_hh": module.weight_hh_l0, b_ih: module.bias_ih_l0})
    inputs.update({b_hh[0]: module.bias_hh_l0} if b_hh else {})
    ops = torch_ops()
    carry_names = [f"carry0.{n}" for n in model.carry_names]

    names = {
        "weight_ih_l0": "W_ih",
        "weight_hh_l0": "W_hh",
        "bias_ih_l0": b_ih,
        **({"bias_hh_l0": b_hh[0]} if b_hh else {}),
    }

    def loss_fn(inputs, run=module):
        carry0 = tuple(inputs[n].unsqueeze(0) for n in carry_names)
        ys, carry_T = run(inputs["xs"], carry0 if len(carry0) > 1 else carry0[0])
        carry_T = carry_T if isinstance(carry_T, tuple) else (carry_T,)
        return model.loss(ops, consts, ys, tuple(c[0] for c in carry_T))

    def pure_loss(inputs):
        """The layer with its parameters taken from `inputs` (torch.func.functional_call), as
        torch.func's transforms need: the module's own parameters are not their inputs."""
        weights = {attr: inputs[name] for attr, name in names.items()}
        return loss_fn(inputs, run=lambda *args: torch.func.functional_call(module, weights, args))

    settings: dict = {"layer": layer.label}
    if not layer.compiled:
        return _torch.prepared_from_loss(
            loss_fn, inputs, wrt, settings=settings, pure_loss=pure_loss, batch=Batch(model, case, consts)
        )
    compiled_loss, compile_settings = _torch_compile.compiled(loss_fn, dynamo_config={"allow_rnn": True})
    compiled_pure = _torch_compile.compiled(pure_loss, dynamo_config={"allow_rnn": True})[0]
    return _torch.prepared_from_loss(
        compiled_loss,
        inputs,
        wrt,
        settings={**settings, **compile_settings},
        pure_loss=compiled_pure,
        batch=Batch(model, case, consts),
    )


@functools.cache
def try_dtype(layer: Layer, dtype: str, device: str) -> str | None:
    """None if a tiny `layer` runs forward and backward at `dtype` on `device`, else why not (tried
    once per process: the answer depends on the device and the build, not on the sizes). A compiled
    layer is tried compiled, its input without grad as in every case it runs (torch picks its
    MKLDNN LSTM kernel on a CPU only then)."""
    import torch

    try:
        module = getattr(torch.nn, layer.module)(2, 2, **dict(layer.options)).to(
            device=device, dtype=_torch.torch_dtype(dtype)
        )

        def run(x):
            return module(x)[0].sum()

        if layer.compiled:
            run = _torch_compile.compiled(run, dynamo_config={"allow_rnn": True})[0]
        run(torch.ones(3, 1, 2, device=device, dtype=_torch.torch_dtype(dtype))).backward()
    except Exception as exc:  # the layer's own refusal is the answer
        how = f"torch.compile of {layer.label}" if layer.compiled else layer.label
        return f"{how} at {dtype} on {device} failed when tried: {type(exc).__name__}: {exc}"[:300]
    return None


_LSTM = Layer("lstm", "LSTM", 4)
_GRU = Layer("gru", "GRU", 3, biases=("b_ih", "b_hh"))
# The compiled LSTM runs float64 everywhere; float32 (and bfloat16) where a compile of it runs when
# tried: on a CPU with MKLDNN, torch's compiled backward of its MKLDNN LSTM kernel gets a null
# workspace (pytorch#185163, not fixed in torch 2.13.0), an error torch raises, not a wrong value.
DRIVERS = tuple(
    anchor(
        name, _torch.TORCH, summary, prepare=prepare, layer=layer, try_dtype=functools.partial(try_dtype, layer), **f
    )
    for name, summary, layer, f in (
        ("torch_nn_lstm", "anchor: torch.nn.LSTM", _LSTM, {}),
        (
            "torch_nn_rnn",
            "anchor: torch.nn.RNN(tanh)",
            Layer("elman_tanh", "RNN", 1, (("nonlinearity", "tanh"),)),
            {},
        ),
        ("torch_nn_gru", "anchor: torch.nn.GRU", _GRU, {}),
        (
            "torch_nn_lstm_compiled",
            "torch.compile(inductor, allow_rnn) of torch.nn.LSTM",
            dataclasses.replace(_LSTM, compiled=True),
            {"compiled": True, "dtypes": ("float64",)},
        ),
        (
            "torch_nn_gru_compiled",
            "torch.compile(inductor, allow_rnn) of torch.nn.GRU",
            dataclasses.replace(_GRU, compiled=True),
            {"compiled": True},
        ),
    )
)
