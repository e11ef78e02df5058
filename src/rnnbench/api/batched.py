"""check_recurrence(batched=True): the one number of examples B every carry leaf (its first axis),
every xs leaf (its second, after T) and every y_t leaf (its first) hold, checked before any driver runs
(rnnbench.api.validate calls it; its messages in rnnbench.api.messages)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rnnbench.api.messages import problem
from rnnbench.api.trees import flatten, leaf_name


def batch_size(batched: Any, *, carry: Any, xs: Any, example_y: Any) -> int | None:
    """B where `batched`: the one size of every carry leaf's first axis, every xs leaf's second (after
    T) and every y_t leaf's first; None where not batched."""
    if not isinstance(batched, (bool, np.bool_)):
        raise problem("batched_type", batched=batched)
    if not batched:
        return None
    leading = {}
    for root, tree, axis in (("carry0", carry, 0), ("xs", xs, 1), ("y", example_y, 0)):
        for path, leaf in [] if tree is None else flatten(tree):
            where = leaf_name(root, path)
            if np.ndim(leaf) <= axis:
                raise problem("batch_axis", where=where, shape=np.shape(leaf), axis=axis)
            leading[where] = np.shape(leaf)[axis]
    if len(set(leading.values())) > 1:
        raise problem("batch_sizes", sizes=", ".join(f"{w} {n}" for w, n in leading.items()))
    return int(next(iter(leading.values())))
