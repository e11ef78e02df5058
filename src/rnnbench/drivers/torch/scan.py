"""Mechanism: torch._higher_order_ops.scan over the model's step. The combine function closes over
the parameters (the idiomatic form, and the one docs/bugs.md §1 needs); recurrences without xs scan
over a (T, 1) dummy.

Configurations (rows of DRIVERS):
- compiled: torch.compile (inductor); the loop stays a loop in the graph, so compile time does not
  grow with T.
- capture_scalar_outputs: torch._dynamo.config.capture_scalar_outputs, set and recorded. torch
  2.9.0's inductor fails on aten._local_scalar_dense without it (docs/bugs.md §1);
  torch_scan_compiled_default_config leaves it off so the known-issues registry notices when
  upstream no longer needs it.
- clone_carry: clone every carry leaf, not only y. torch 2.13.0's inductor refuses a recurrence
  whose carry comes from an op that saves its output for backward (tanh, sigmoid) with "scan might
  be aliasing the input or the output!", although cloning y alone is the documented contract: the
  clone is optimised away and y aliases the carry again. torch_scan_compiled_clone_y_only keeps the
  documented form under a strict registry entry (on the tanh/sigmoid models rnn, lstm, and on
  decay, which compiles).
- mode: torch.compile's mode; "reduce-overhead" replays the compiled program as CUDA graphs, so
  the row runs on CUDA only.
- checkpoint: each step under torch.utils.checkpoint (non-reentrant) inside the scan's body (remat).
- reverse: scan's reverse=True, the native last-to-first scan: a Model.reverse model runs on it
  directly, any other model on the flipped sequence (its ys flipped back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rnnbench.drivers.base import Batch, Driver, Prepared, configured, supports_only, unflatten
from rnnbench.drivers.torch import _compile as _torch_compile
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.model import BY_PRECISION, Case, Model, Recur, flipped, run_forward, scan_inputs
from rnnbench.ops import torch_ops


def scan_recur(clone_carry: bool = False, reverse: bool = False) -> Recur:
    """torch scan as the model's `recur` (reverse: scan's reverse=True). Eager needs only the y
    clone; clone_carry clones every carry leaf as well (see the module docstring)."""
    from torch._higher_order_ops.scan import scan

    ops = torch_ops()

    def recur(step, params, carry0, xs, length):
        xs, step_x = scan_inputs(ops, xs, length, like=carry0[0])

        def combine(carry, x):
            new_carry, y = step(ops, params, carry, step_x(x))
            # scan forbids outputs aliasing its inputs or each other: y is often a carry leaf, and a
            # new carry leaf may be an old one, x, or a closed-over parameter (lifted to an input).
            lifted = (*carry, x, *params.values())
            new_carry = tuple(n.clone() if clone_carry or any(n is i for i in lifted) else n for n in new_carry)
            return new_carry, y.clone()

        carry, ys = scan(combine, tuple(carry0), xs, reverse=reverse)
        return ys, tuple(carry)

    return recur


def scan_loss(
    model: Model, case: Case, consts, clone_carry: bool = False, *, checkpoint: bool = False, reverse: bool = False
) -> Callable[[dict[str, Any]], Any]:
    """The loss as a function of the inputs dict, with every recurrence run by scan (checkpoint: its
    step under torch.utils.checkpoint; reverse: a native reverse scan, forward models flipped around it)."""
    ops = torch_ops()
    recur = scan_recur(clone_carry, reverse)
    if checkpoint:
        recur = _torch.checkpointed(recur)
    forward_recur, reverse_recur = (flipped(ops, recur), recur) if reverse else (recur, None)

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        ys, carry = run_forward(
            ops,
            model,
            params,
            carry0=carry0,
            xs=xs,
            length=case.length,
            recur=forward_recur,
            reverse_recur=reverse_recur,
        )
        return model.loss(ops, consts, ys, carry)

    return loss_fn


@dataclass(frozen=True)
class ScanConfig:
    compiled: bool = False
    capture_scalar_outputs: bool = True
    clone_carry: bool = True
    mode: str | None = None  # torch.compile's mode
    checkpoint: bool = False  # each step under torch.utils.checkpoint
    reverse: bool = False  # scan's reverse


def prepare(config: ScanConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    mechanism: dict[str, Any] = {}  # the default rows' settings stay as their records have them
    if config.checkpoint:
        mechanism["checkpoint"] = "torch.utils.checkpoint(use_reentrant=False) per step"
    if config.reverse:
        mechanism["reverse"] = True
    if not config.compiled:
        # eager scan traces its body with dynamo: without a clean state, a second size in one process retraces it
        # with dynamic shapes (a row's verdict would depend on the rows before it; docs/bugs.md#unregistered)
        _torch_compile.fresh_dynamo_state()
        loss_fn = scan_loss(model, case, consts, checkpoint=config.checkpoint, reverse=config.reverse)
        settings = {"mode": "eager", **mechanism}
        return _torch.prepared_from_loss(
            loss_fn, inputs, wrt, settings=settings, second_order=True, batch=Batch(model, case, consts)
        )
    loss_fn, settings = _torch_compile.compiled(
        scan_loss(
            model, case, consts, clone_carry=config.clone_carry, checkpoint=config.checkpoint, reverse=config.reverse
        ),
        {"capture_scalar_outputs": config.capture_scalar_outputs},
        config.mode,
    )
    settings["clone_carry"] = config.clone_carry
    settings.update(mechanism)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings=settings, batch=Batch(model, case, consts))


def supports_carry(model: Model) -> str | None:
    """Driver.supports of the torch scan rows: torch's scan autograd counts a tangent for every carry
    leaf, an integer one too, and then asserts (outs_to_grad != tangents), eager and compiled alike."""
    integer = [n for n in model.integer_inputs if n.startswith("carry0.")]
    if integer:
        leaves = ", ".join(integer)
        return f"torch scan's autograd cannot carry an integer leaf ({leaves}): it asserts on the tangent count"
    return None


def _row(name: str, summary: str, config: ScanConfig, **fields) -> Driver:
    fields = {"compiled": config.compiled, "second_order": not config.compiled, "supports": supports_carry, **fields}
    return configured(name, _torch.TORCH, summary, prepare=prepare, config=config, **fields)


DRIVERS = (
    _row(
        "torch_scan",
        "torch._higher_order_ops.scan, eager",
        ScanConfig(),
        dtypes=BY_PRECISION,
        environments=("main", "xla"),
        repro="scan",
    ),
    _row(
        "torch_scan_compiled",
        "torch.compile(inductor) of torch scan",
        ScanConfig(compiled=True),
        dtypes=BY_PRECISION,
        environments=("main", "xla"),
        repro="scan",
    ),
    _row(
        "torch_scan_compiled_cudagraphs",
        "torch.compile(inductor, mode=reduce-overhead: CUDA graphs) of torch scan",
        ScanConfig(compiled=True, mode="reduce-overhead"),
        dtypes=BY_PRECISION,
        devices=("cuda",),
        suite="gpu",
    ),
    # Variants that exist for a known issue: the failure does not depend on the model, so a few
    # models show it without paying compile time on all of them.
    _row(
        "torch_scan_compiled_clone_y_only",
        "torch.compile(inductor) of torch scan, only y cloned",
        ScanConfig(compiled=True, clone_carry=False),
        supports=supports_only(("decay", "rnn", "lstm")),
    ),
    _row(
        "torch_scan_compiled_default_config",
        "torch.compile(inductor) of torch scan, capture_scalar_outputs left off",
        ScanConfig(compiled=True, capture_scalar_outputs=False),
        supports=supports_only(("decay", "rnn")),
        environments=("main", "xla"),
    ),
    # The mechanisms people train with (issue 52): rows for a bug class, run on every core model by the
    # slow tier and `--suite bugs`.
    _row(
        "torch_scan_reverse",
        "torch._higher_order_ops.scan, reverse=True, eager (forward models on the flipped sequence)",
        ScanConfig(reverse=True),
        dtypes=BY_PRECISION,
        suite="bugs",
    ),
    _row(
        "torch_scan_checkpoint",
        "torch._higher_order_ops.scan, eager, each step under torch.utils.checkpoint (remat)",
        ScanConfig(checkpoint=True),
        dtypes=BY_PRECISION,
        suite="bugs",
    ),
    _row(
        "torch_scan_checkpoint_compiled",
        "torch.compile(inductor) of torch scan, each step under torch.utils.checkpoint (remat)",
        ScanConfig(compiled=True, checkpoint=True),
        dtypes=BY_PRECISION,
        suite="bugs",
    ),
)
