"""The one interface every driver provides, and helpers to move canonical data in and out.

A driver turns (model, case, dtype, device) into a `Prepared`: callables that compute the loss and
canonical gradients (for checking) and the forward / forward+backward work (for timing). Driver
modules import their framework lazily, inside `prepare`, so listing drivers never imports torch,
jax or torch_xla.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from rnnbench.model import Case, Model

Grads = dict[str, Optional[np.ndarray]]


@dataclass(frozen=True)
class Prepared:
    """loss_and_grads() -> (loss, {input name: gradient or None}), float64 numpy, canonical layout.
    forward() / forward_backward(): the timed work; they return device results that `block`
    waits on (asynchronous frameworks would otherwise be timed while still tracing/dispatching).
    settings: framework settings this run depends on, recorded with the result.
    hvp(v) -> {input name: (H v)[name]}: optional second order, the Hessian of the loss w.r.t. the
    compared inputs times a direction v (same names and shapes as the gradients); None where the
    driver has no second-order path (e.g. torch.compile has no double backward)."""

    loss_and_grads: Callable[[], tuple[float, Grads]]
    forward: Callable[[], Any]
    forward_backward: Callable[[], Any]
    block: Callable[[Any], None]
    settings: Mapping[str, Any] = field(default_factory=dict)
    hvp: Optional[Callable[[Mapping[str, np.ndarray]], Grads]] = None


@dataclass(frozen=True)
class Driver:
    """name: unique id. framework: "torch", "jax", "flax", "torch_xla". environments: the Python
    environments that run it ("main"; "xla" = torch 2.9.0 + torch_xla): a driver listed in several
    gives one row per environment, so one table compares framework versions (rnnbench.run.environments).
    compiled: True when the first call compiles.
    anchor: a vendor layer (torch.nn.LSTM, flax cells) rather than the model's own step.
    available() -> None or the reason the framework cannot be used here.
    supports(model) -> None or the reason this driver cannot express the model.
    prepare(model, case, dtype, device) -> Prepared.
    versions() -> {package: version} of what the driver runs on.
    autocast: the autocast dtype the driver runs the loss under (parameters stay float32), or None.
    second_order: its Prepared provides hvp (double backward / forward-over-reverse), checked by
    rnnbench.check.second_order; compiled torch drivers have no double backward."""

    name: str
    framework: str
    summary: str
    prepare: Callable[[Model, Case, str, str], Prepared]
    available: Callable[[], Optional[str]]
    versions: Callable[[], dict[str, str]]
    supports: Callable[[Model], Optional[str]] = lambda model: None
    environments: tuple[str, ...] = ("main",)
    compiled: bool = False
    anchor: bool = False
    dtypes: tuple[str, ...] = ("float64", "float32")
    devices: tuple[str, ...] = ("cpu", "cuda")
    suite: str = "core"  # "bugs": a driver that exists for a BUGS.md class (e.g. preallocated buffers)
    autocast: Optional[str] = None
    second_order: bool = False


def module_available(module: str) -> Callable[[], Optional[str]]:
    """available() for a driver that needs an importable module (checked without importing it)."""

    def check() -> Optional[str]:
        import importlib.util

        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"python package '{module}' is not installed in this environment"

    return check


def package_versions(*packages: str) -> Callable[[], dict[str, str]]:
    def versions() -> dict[str, str]:
        from importlib.metadata import PackageNotFoundError, version

        out = {}
        for p in packages:
            try:
                out[p] = version(p)
            except PackageNotFoundError:
                out[p] = "missing"
        return out

    return versions


def flat_inputs(model: Model, case: Case) -> dict[str, np.ndarray]:
    """Every input by canonical name: params, "carry0.<leaf>", and "xs" when present."""
    flat = dict(case.params)
    flat.update({f"carry0.{n}": c for n, c in zip(model.carry_names, case.carry0)})
    if case.xs is not None:
        flat["xs"] = case.xs
    return flat


def unflatten(model: Model, case: Case, flat: Mapping[str, Any]) -> tuple[dict[str, Any], tuple, Any]:
    """(params, carry0, xs) from a dict keyed like flat_inputs (any framework's arrays)."""
    params = {k: flat[k] for k in case.params}
    carry0 = tuple(flat[f"carry0.{n}"] for n in model.carry_names)
    return params, carry0, flat.get("xs")


def supports_kind(kind: str) -> Callable[[Model], Optional[str]]:
    """supports() for an anchor driver: a vendor layer computes one model family only."""

    def supports(model: Model) -> Optional[str]:
        return None if model.kind == kind else f"vendor layer computes {kind} only"

    return supports
