"""Smaller cases for the tests whose cost grows steeply with the sizes and whose property does not
depend on them: finite differences (10 forward passes per input entry) and second order (the
unrolled loops' compile: jax_loop's LSTM H v program grows as T^2 in XLA's fusion)."""

from __future__ import annotations

from rnnbench.model import Model


def halved(model: Model) -> dict[str, int]:
    """The model's default sizes with every size of 8 or more halved (T=16 B=4 I=8 H=16 -> T=8 B=4
    I=4 H=8; K=16 n=8 -> K=8 n=4). Sizes that differed still differ (I != H, B > 1, several steps
    for the carry chain and both layers of a stacked model), and the bug-class variants' small
    cases (T=5, B=I=H=3) are kept as they are."""
    defaults = model.sizes_with_defaults()
    return model.sizes_with_defaults({k: v // 2 if v >= 8 else v for k, v in defaults.items()})
