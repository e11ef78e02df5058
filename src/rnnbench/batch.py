"""A batched case's examples, for the per_example mode (rnnbench.modes): each example's own case
(the case's slice b, B = 1, where rnnbench.model.batch_layout says each example sits), and whether
the case's loss is the weighted sum of its examples' losses, checked on the case before a
per_example row runs.

Per-example gradients are laid out as (B, *shape of the input in one example's case): a shared
input (a parameter, a carry leaf without a batch axis) of shape S gives (B, *S); a batched input
keeps its batch axis at size 1 in each example (an xs (T, B, I) gives (B, T, 1, I)), so entry b is
exactly what example b's own case compares.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Layout, Model, batch_layout, reference_loss

# Σ_b weight * loss(example b) equals the batch's loss in exact arithmetic; float64 rounding of the B + 1
# forwards leaves them ~1e-16 x the loss's condition apart, a step or loss that mixes examples O(1)
DECOMPOSES_RTOL = 1e-9


def example(model: Model, case: Case, lay: Layout, b: int) -> Case:
    """Example b's own case: every batched input and const sliced to b on its axis (kept, size 1)."""

    def cut(name: str, a: np.ndarray, axes: Mapping[str, int]) -> np.ndarray:
        return np.take(a, [b], axis=axes[name]) if name in axes else a

    sizes = {**case.sizes, **({"B": 1} if "B" in case.sizes else {})}
    return dataclasses.replace(
        case,
        sizes=sizes,
        carry0=tuple(cut(f"carry0.{n}", c, lay.inputs) for n, c in zip(model.carry_names, case.carry0)),
        xs=None if case.xs is None else cut("xs", case.xs, lay.inputs),
        consts={k: cut(k, v, lay.consts) for k, v in case.consts.items()},
    )


def examples(model: Model, case: Case, lay: Layout) -> list[Case]:
    return [example(model, case, lay, b) for b in range(lay.size)]


def unavailable(model: Model, case: Case) -> str | None:
    """None where the per_example mode can judge `case`, else why not: the model has no batch axis,
    or the case's loss (the model's own or a loss form) is not weight * Σ_b loss(example b) on it
    (the step or the loss mixes examples, or a loss term reads a carry leaf no example owns)."""
    lay = batch_layout(model, case)
    if isinstance(lay, str):
        return lay
    with np.errstate(all="ignore"):
        whole = reference_loss(model, case)
        try:
            parts = [reference_loss(model, c) for c in examples(model, case, lay)]
        except Exception as exc:  # a step or loss that indexes across the batch has no one-example form
            return f"the loss cannot be computed on one example alone: {type(exc).__name__}: {exc}"
    summed = lay.weight * sum(parts)
    if whole == summed or not np.isfinite(whole) and not np.isfinite(summed):
        return None
    scale = abs(whole) + lay.weight * sum(abs(p) for p in parts)
    if abs(whole - summed) <= DECOMPOSES_RTOL * scale:
        return None
    return (
        f"the loss does not decompose over the {lay.size} examples: the batch's loss is {whole:.10g}, "
        f"{lay.weight:g} x the sum of the examples' own losses is {summed:.10g} (the step or the loss mixes examples, "
        f"or reads a carry leaf without a batch axis)"
    )


def stacked(per_example: list[Mapping[str, np.ndarray]], names: list[str]) -> dict[str, np.ndarray]:
    """{name: (B, *shape in one example)} from one mapping per example."""
    return {n: np.stack([np.asarray(g[n], dtype=np.float64) for g in per_example]) for n in names}
