"""torch._higher_order_ops.scan, eager. The combine function closes over the parameters (the
idiomatic form, and the one BUGS.md §1 needs); recurrences without xs scan over a (T, 1) dummy."""

from __future__ import annotations

from rnnbench.drivers import _torch
from rnnbench.drivers.base import Driver, Prepared, unflatten
from rnnbench.model import Case, Model
from rnnbench.ops import torch_ops


def scan_loss(model: Model, case: Case, consts, clone_carry: bool = False):
    """clone_carry: clone every carry leaf as well as y. Under inductor (torch 2.13.0) cloning y
    alone still fails with "scan might be aliasing the input or the output!" because the clone is
    optimised away and y aliases the carry again; eager needs only the y clone."""
    import torch
    from torch._higher_order_ops.scan import scan

    ops = torch_ops()

    def loss_fn(inputs):
        params, carry0, xs = unflatten(model, case, inputs)
        if xs is not None and model.prologue is not None:
            xs = model.prologue(ops, params, xs)
        has_xs = xs is not None
        if not has_xs:
            any_leaf = carry0[0]
            xs = torch.zeros(case.length, 1, dtype=any_leaf.dtype, device=any_leaf.device)

        def combine(carry, x):
            new_carry, y = model.step(ops, params, carry, x if has_xs else None)
            # scan forbids outputs aliasing its inputs or each other: y is often a carry leaf, and a
            # new carry leaf may be an old one, x, or a closed-over parameter (lifted to an input).
            lifted = (*carry, x, *params.values())
            new_carry = tuple(
                n.clone() if clone_carry or any(n is i for i in lifted) else n for n in new_carry
            )
            return new_carry, y.clone()

        carry, ys = scan(combine, tuple(carry0), xs)
        return model.loss(ops, consts, ys, tuple(carry))

    return loss_fn


def prepare(model: Model, case: Case, dtype: str, device: str) -> Prepared:
    inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
    return _torch.prepared_from_loss(scan_loss(model, case, consts), inputs, wrt, {"mode": "eager"}, second_order=True)


DRIVER = Driver(
    name="torch_scan",
    framework="torch",
    summary="torch._higher_order_ops.scan, eager",
    prepare=prepare,
    second_order=True,
    available=_torch.available,
    versions=_torch.versions,
    dtypes=("float64", "float32", "bfloat16"),
    environments=("main", "xla"),
)
