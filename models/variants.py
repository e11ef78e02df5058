"""docs/bugs.md §1 variants, generated from every other model file: the same recurrence with the
gradient requirements and the way parameters reach the step changed. Torch 2.9.0's scan lost the
carry cotangent only when the initial carry did not require grad and the body closed over the
parameters; these variants put each model on both sides of every such condition, on every driver
(a new driver, e.g. torch_xla's scan, runs them with no edit).

<model>@carry0_grad       every initial-carry leaf requires grad (where the base model has one that does not)
<model>@carry0_nograd     no initial-carry leaf requires grad (where the base model has one that does)
<model>@params_in_carry   parameters travel through the carry unchanged (explicit, not closed over);
                          d loss / d param is compared as "carry0.param_<name>"
<model>@params_as_xs      the single parameter is fed as a per-step scan input (broadcast over T, or
                          stacked with x_t when it has x_t's shape); "xs" is compared, so each step's
                          contribution to the parameter gradient is checked separately

Variants run at small sizes (T, K <= 5, other sizes <= 3): the finite-difference parts of their
oracles and the compile time of unrolled drivers stay small.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Iterator, Mapping

import numpy as np

from rnnbench.model import Case, Model

SEPARATOR = "@"


def _base_models() -> Iterator[Model]:
    """Models of every other module of this package (the registry itself lists this module too)."""
    import rnnbench_models

    for info in sorted(pkgutil.iter_modules(rnnbench_models.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name == __name__.rsplit(".", 1)[-1]:
            continue
        for model in getattr(importlib.import_module(f"rnnbench_models.{info.name}"), "MODELS", ()):
            if not model.island_grads:  # autocast models keep their exact-in-bf16 data as designed
                yield model


def _small(sizes: Mapping[str, int]) -> dict[str, int]:
    return {k: min(v, 5) if k in ("T", "K") else min(v, 3) for k, v in sizes.items()}


def _variant(base: Model, tag: str, summary: str, **changes) -> Model:
    if "step" in changes:  # a rewritten step is no longer the base's declared linear recurrence
        changes["linear_recurrence"] = None
    return dataclasses.replace(
        base,
        name=f"{base.name}{SEPARATOR}{tag}",
        summary=f"{summary} ({base.name})",
        default_sizes=_small(base.default_sizes),
        kind="generic",  # vendor layers (anchors) compute the base model only
        suite="bugs",
        flops=None,  # gradient requirements differ from the base model's: its count would not hold
        **changes,
    )


# ---- initial carry with / without grad ---------------------------------------------------------
def carry0_requires_grad(base: Model, flag: bool) -> Model:
    def make_case(sizes, seed):
        case = base.make_case(sizes, seed)
        return dataclasses.replace(
            case, model=f"{base.name}{SEPARATOR}{tag}", carry0_requires_grad=(flag,) * len(case.carry0)
        )

    tag = "carry0_grad" if flag else "carry0_nograd"
    # The base oracle, where it covers the newly differentiated leaves; rnnbench fills the rest by
    # finite differences (and then judges with their tolerance).
    return _variant(
        base, tag, f"every initial-carry leaf {'requires' if flag else 'without'} grad", make_case=make_case
    )


# ---- parameters through the carry --------------------------------------------------------------
def params_in_carry(base: Model, param_names: tuple[str, ...]) -> Model:
    n = len(base.carry_names)
    carry_names = base.carry_names + tuple(f"param_{p}" for p in param_names)

    def step(ops, params, carry, x):
        p = dict(zip(param_names, carry[n:]))
        if x is not None and base.prologue is not None:  # the hoisted work, per step now
            x = base.prologue(ops, p, x[None])[0]
        new_carry, y = base.step(ops, p, tuple(carry[:n]), x)
        return tuple(new_carry) + tuple(carry[n:]), y

    def loss(ops, consts, ys, carry):
        return base.loss(ops, consts, ys, tuple(carry[:n]))

    def make_case(sizes, seed):
        case = base.make_case(sizes, seed)
        return dataclasses.replace(
            case,
            model=f"{base.name}{SEPARATOR}params_in_carry",
            params={},
            carry0=tuple(case.carry0) + tuple(case.params[p] for p in param_names),
            carry0_requires_grad=tuple(case.carry0_requires_grad) + (True,) * len(param_names),
        )

    def oracle(case: Case) -> dict[str, np.ndarray]:
        base_case = dataclasses.replace(
            case,
            params=dict(zip(param_names, case.carry0[n:])),
            carry0=tuple(case.carry0[:n]),
            carry0_requires_grad=tuple(case.carry0_requires_grad[:n]),
        )
        grads = base.oracle(base_case)
        return {(f"carry0.param_{k}" if k in param_names else k): v for k, v in grads.items()}

    def cotangent_consts(dys, dcarry):  # the parameter leaves are not in the base loss
        return base.cotangent_consts(dys, tuple(dcarry[:n])) if not any(np.any(d) for d in dcarry[n:]) else None

    return _variant(
        base,
        "params_in_carry",
        "parameters passed through the carry",
        carry_names=carry_names,
        step=step,
        loss=loss,
        prologue=None,
        make_case=make_case,
        oracle=oracle if base.oracle is not None else None,
        cotangent_consts=cotangent_consts if base.cotangent_consts is not None else None,
    )


# ---- parameter as a per-step input -------------------------------------------------------------
def params_as_xs(base: Model, param: str, stacked: bool) -> Model:
    """stacked: the base has x_t of the parameter's shape; xs' = (T, 2, ...) holds (x_t, param)."""

    def step(ops, params, carry, x):
        if stacked:
            return base.step(ops, {param: x[1]}, carry, x[0])
        return base.step(ops, {param: x}, carry, None)

    def make_case(sizes, seed):
        case = base.make_case(sizes, seed)
        p = np.broadcast_to(case.params[param], (case.length,) + case.params[param].shape)
        xs = np.stack([case.xs, p], axis=1) if stacked else p
        return dataclasses.replace(
            case,
            model=f"{base.name}{SEPARATOR}params_as_xs",
            params={},
            xs=np.ascontiguousarray(xs),
            xs_requires_grad=True,
        )

    return _variant(
        base,
        "params_as_xs",
        "the parameter fed as a per-step scan input",
        step=step,
        make_case=make_case,
        oracle=None,
        oracle_kind="finite_differences",
    )


def variants_of(base: Model) -> list[Model]:
    case = base.make_case(_small(base.default_sizes), 0)
    out = []
    if not all(case.carry0_requires_grad or (False,)):
        out.append(carry0_requires_grad(base, True))
    if any(case.carry0_requires_grad):
        out.append(carry0_requires_grad(base, False))
    if base.forward is not None:  # several recurrences: the step variants below rewrite the one step
        return out
    if case.params:
        out.append(params_in_carry(base, tuple(case.params)))
    if len(case.params) == 1 and base.prologue is None:
        ((name, value),) = case.params.items()
        if case.xs is None:
            out.append(params_as_xs(base, name, stacked=False))
        elif case.xs.shape[1:] == value.shape:
            out.append(params_as_xs(base, name, stacked=True))
    return out


MODELS = tuple(v for base in _base_models() for v in variants_of(base))
