"""A user's pytrees (nested dicts, tuples and lists of arrays) as the flat arrays the suite runs."""

from __future__ import annotations

from typing import Any

import numpy as np


def flatten(tree: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """[(path, leaf)] of nested dicts (keys sorted), tuples and lists; anything else is a leaf."""
    if isinstance(tree, dict):
        return [item for k in sorted(tree) for item in flatten(tree[k], (*path, k))]
    if isinstance(tree, (tuple, list)):
        return [item for i, v in enumerate(tree) for item in flatten(v, (*path, i))]
    return [(path, tree)]


def rebuild(template: Any, leaves: Any) -> Any:
    """The template's structure with its leaves taken in order from the iterator `leaves`. Plain
    Python containers only: it runs inside traced steps (dynamo, jax), which trace through it."""
    if isinstance(template, dict):
        return {k: rebuild(template[k], leaves) for k in sorted(template)}
    if isinstance(template, (tuple, list)):
        return type(template)(rebuild(v, leaves) for v in template)
    return next(leaves)


def leaf_name(root: str, path: tuple) -> str:
    """A leaf as the user indexes it: params['layer']['W'], carry0[0], xs."""
    return root + "".join(f"[{p!r}]" for p in path)


def is_flat(carry: Any) -> bool:
    """A tuple of arrays (no nested trees): its leaves keep the names c0, c1, ..."""
    return isinstance(carry, tuple) and all(not isinstance(c, (tuple, list, dict)) for c in carry)


class Tree:
    """A user's pytree (nested dicts, tuples, lists of arrays) as the flat arrays the suite runs:
    leaf names joined from the path ("layer.W"), and packing of per-step trees into one vector per
    step (xs, ys) so every driver's loop or scan sees single arrays. Shapes: a packed sequence is
    (T, total), total = the sum of the leaves' per-step sizes; batched (every leaf holds a batch of
    examples after T: (T, B, ...)), (T, B, total), total the sum of one example's sizes, so the batch
    stays an axis of its own (the per_example mode slices it)."""

    def __init__(self, tree: Any, per_step: bool = False, batched: bool = False) -> None:
        items = flatten(tree)
        self.template = tree
        self.paths = [path for path, _ in items]
        self.leaves = [leaf for _, leaf in items]
        self.single = not isinstance(tree, (dict, tuple, list))  # a bare array: nothing to pack
        self.batched = batched
        self.shapes = [np.shape(leaf)[int(per_step) + int(batched) :] for leaf in self.leaves]
        self.sizes = [int(np.prod(s)) for s in self.shapes]

    def names(self, prefix: str = "") -> list[str]:
        return [prefix + ".".join(str(p) for p in path) for path in self.paths]

    def unflatten(self, leaves) -> Any:
        return rebuild(self.template, iter(leaves))

    def pack_sequence(self) -> np.ndarray:
        """(T, ...) leaves -> (T, total): float64, or int64 where every leaf is an integer array (token
        ids: indices stay indices; validate refuses a tree that mixes the two)."""
        integer = all(np.asarray(leaf).dtype.kind in "iu" for leaf in self.leaves)
        dtype = np.int64 if integer else np.float64
        if self.single:
            return np.asarray(self.leaves[0], dtype=dtype)
        lead = np.shape(self.leaves[0])[: 2 if self.batched else 1]
        return np.concatenate([np.asarray(leaf, dtype).reshape(*lead, -1) for leaf in self.leaves], axis=-1)

    def pack(self, ops, leaves: list) -> Any:
        """One step's leaves (each (B, ...) where batched) -> one packed array ((B, total) or (total,))."""
        if self.single:
            return leaves[0]
        return ops.concat(
            [ops.reshape(leaf, (*tuple(leaf.shape[: int(self.batched)]), -1)) for leaf in leaves], axis=-1
        )

    def unpack(self, ops, packed, leading: tuple = ()) -> Any:
        """A packed array -> the tree; leading: its axes before the packed one (() for one step's
        vector, (T,) for a sequence, with B after each where batched)."""
        if self.single:
            return packed
        out, start = [], 0
        for shape, size in zip(self.shapes, self.sizes):
            out.append(ops.reshape(packed[..., start : start + size], (*leading, *shape)))
            start += size
        return self.unflatten(out)
