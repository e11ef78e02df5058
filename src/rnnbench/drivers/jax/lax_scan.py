"""Mechanism: jax.lax.scan under jit: the step is traced once and lowered to an XLA while loop.

Configurations (rows of DRIVERS):
- unroll: lax.scan's unroll, the number of steps each iteration of the while loop runs (1: one
  step per iteration). Unrolling trades a larger program for fewer loop iterations, and lets XLA
  fuse across neighbouring steps.
- reverse: lax.scan's reverse=True, the native last-to-first scan: a Model.reverse model runs on it
  directly, any other model on the flipped sequence (its ys flipped back), so every model exercises it.
- remat: the step under jax.checkpoint with this jax.checkpoint_policies policy ("nothing_saveable":
  every residual recomputed in the backward; "dots_saveable": matmul results kept), trading backward
  time for the memory the scan keeps per step. remat3: jax's jax_remat3 flag (its newer
  implementation of jax.checkpoint) set to this value while the loss is traced; None leaves it as is.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from rnnbench.drivers.base import Batch, Prepared, configured, unflatten
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.model import BY_PRECISION, Case, Model, flipped, run_forward
from rnnbench.ops import jax_ops


@dataclass(frozen=True)
class LaxScanConfig:
    unroll: int = 1  # lax.scan's unroll
    reverse: bool = False  # lax.scan's reverse
    remat: str | None = None  # a jax.checkpoint_policies name, or None: no jax.checkpoint
    remat3: bool | None = None  # jax_remat3 while tracing, or None: as the process has it


def remat3_setting(value: bool | None) -> Any:
    """A context manager under which jax traces with jax_remat3 = value (None: unchanged); jax
    versions without the flag refuse a row that asks for it."""
    from jax._src import config

    if value is None:
        return nullcontext()
    if not hasattr(config, "remat3"):
        raise RuntimeError("this jax version has no jax_remat3 flag")
    return config.remat3(value)


def prepare(config: LaxScanConfig, model: Model, case: Case, dtype: str, device: str) -> Prepared:
    import jax

    diff, rest, consts = _jax.model_arrays(model, case, dtype, device)
    ops = jax_ops()
    run_model, projection = _jax.input_projection(model, case, dtype)

    policy = None if config.remat is None else getattr(jax.checkpoint_policies, config.remat)

    def recur(step, params, carry0, xs, length):
        def body(c, x):
            return step(ops, params, c, x)

        if config.remat is not None:
            body = jax.checkpoint(body, policy=policy)
        # lax.scan takes xs=None with a length, and then hands the step None
        carry, ys = jax.lax.scan(body, tuple(carry0), xs, length=length, unroll=config.unroll, reverse=config.reverse)
        return ys, carry

    # A reverse scan runs a forward model on the flipped sequence and a Model.reverse one as it is.
    forward_recur, reverse_recur = (flipped(ops, recur), recur) if config.reverse else (recur, None)

    def loss_fn(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        with remat3_setting(config.remat3):  # read while jax.checkpoint is traced
            ys, carry = run_forward(
                ops,
                run_model,
                params,
                carry0=carry0,
                xs=xs,
                length=case.length,
                recur=forward_recur,
                reverse_recur=reverse_recur,
            )
        return model.loss(ops, consts, ys, carry)

    settings: dict[str, Any] = {"jit": True, "loop": "lax.scan", **projection}
    if config.unroll != 1:  # the default row's settings stay as its records have them
        settings["unroll"] = config.unroll
    if config.reverse:
        settings["reverse"] = True
    if config.remat is not None:
        settings["remat"] = config.remat
    if config.remat3 is not None:
        settings["remat3"] = config.remat3
    return _jax.prepared_from_loss(loss_fn, diff, rest, settings, batch=Batch(model, case, consts))


DRIVERS = (
    configured(
        "jax_lax_scan",
        _jax.JAX,
        "jax.jit of jax.lax.scan",
        prepare=prepare,
        config=LaxScanConfig(),
        dtypes=BY_PRECISION,
        repro="scan",
        **_jax.ROW_FIELDS,
    ),
    configured(
        "jax_lax_scan_unroll8",
        _jax.JAX,
        "jax.jit of jax.lax.scan, unroll=8",
        prepare=prepare,
        config=LaxScanConfig(unroll=8),
        dtypes=BY_PRECISION,
        repro="scan",
        **_jax.ROW_FIELDS,
    ),
    # The mechanisms people train with (issue 52): native reverse scans and rematerialization. Rows for a
    # bug class: the slow tier and `--suite bugs` run them on every core model.
    configured(
        "jax_lax_scan_reverse",
        _jax.JAX,
        "jax.jit of jax.lax.scan, reverse=True (forward models on the flipped sequence)",
        prepare=prepare,
        config=LaxScanConfig(reverse=True),
        dtypes=BY_PRECISION,
        suite="bugs",
        **_jax.ROW_FIELDS,
    ),
    *(
        configured(
            f"jax_lax_scan_remat{'3' if remat3 else ''}_{short}",
            _jax.JAX,
            f"jax.jit of jax.lax.scan, step under jax.checkpoint({policy}), jax_remat3 {'on' if remat3 else 'off'}",
            prepare=prepare,
            config=LaxScanConfig(remat=policy, remat3=remat3),
            dtypes=BY_PRECISION,
            suite="bugs",
            **_jax.ROW_FIELDS,
        )
        for remat3 in (False, True)
        for short, policy in (("nothing", "nothing_saveable"), ("dots", "dots_saveable"))
    ),
)
