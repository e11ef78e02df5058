"""Case predicates that known-issue entries name in `affects.conditions` (src/rnnbench/known_issues.json):
each says, from the model and the case alone (numpy or eager torch at the case's values), whether a
registered bug's mechanism is present on a row at `dtype`. An entry is scoped by mechanism, not by the
name of a model or loss, wherever the mechanism can be detected this way."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from rnnbench.check.compare import compare_grads, verdict
from rnnbench.check.tolerance import at_loss_scale, tolerance
from rnnbench.model import Case, Model, is_integer, loop_recur, rollout, run_forward
from rnnbench.ops import forward_pass, numpy_ops, torch_ops
from rnnbench.status import OracleKind, Status

CONDITIONS: dict[str, Callable[[Model, Case, str], bool]] = {
    # Some initial-carry leaf is not differentiated (docs/bugs.md §1's trigger in torch 2.9.0's scan).
    "carry0_without_grad": lambda model, case, dtype: not all(case.carry0_requires_grad or (False,)),
    # The loss's gradient changes beyond the dtype's tolerance when the carry chain of every carry leaf whose
    # initial value has no grad is cut between steps: what torch 2.9.0's scan backward does, since it traces
    # the step's backward with the initial carry as primals, so a leaf without grad gets a zero carry
    # cotangent from every step (_higher_order_ops/scan.py ScanAutogradOp.backward, create_bw_fn).
    "carry_chain_of_leaf_without_grad_matters": lambda model, case, dtype: _carry_chain_cut_matters(model, case, dtype),
    # Some initial-carry leaf is a 0-dimensional tensor (torch 2.9.0 inductor's scan-backward lowering).
    "zero_dim_carry": lambda model, case, dtype: any(getattr(c, "ndim", 0) == 0 for c in case.carry0),
    # The step has trainable parameters (a scan body that closes over them captures tensors).
    "has_params": lambda model, case, dtype: bool(case.params),
    # The scanned step itself reads a parameter, so a body that closes over the parameters captures a
    # tensor (a step whose parameters all act in the prologue, as minGRU's gates do, captures none). A
    # model of several recurrences has no single body: any parameter counts.
    "step_reads_params": lambda model, case, dtype: (
        bool(case.params)
        if model.forward is not None
        else any(not n.startswith("carry0.") for n in differentiated_sizes(model, case)[0])
    ),
    # torch inductor's scan backward loop accumulates the gradient of each differentiated tensor the
    # step reads in a buffer that may alias a buffer of equal element count created after the loop:
    # the gradient of a differentiated tensor upstream of the scan (a parameter the prologue reads,
    # xs) or d loss/d xs' (docs/bugs.md#torch-inductor-scan-body-grad-reuses-donated-buffer).
    "body_grad_numel_shared_upstream": lambda model, case, dtype: _body_grad_numel_shared_upstream(model, case),
    # One carry leaf, with several entries: an unweighted sum of it gives an expanded (stride-0)
    # cotangent with several lanes (docs/bugs.md#torch-inductor-scan-expanded-carry-cotangent).
    "one_carry_leaf_of_several_entries": lambda model, case, dtype: any(
        len(carry) == 1 and np.size(carry[0]) >= 2 for carry in recurrence_carries(model, case)
    ),
    # The carry cotangent crosses a step of the backward loop: two or more steps, or a differentiated
    # initial carry (whose gradient is the loop's last carried value).
    "carry_cotangent_crosses_a_step": lambda model, case, dtype: case.length >= 2 or any(case.carry0_requires_grad),
    # torch's while_loop cuts, between iterations, the chain of every carried leaf whose initial value lacks grad:
    # the zero ys buffer the loop carries, which matters when the loss weights the outputs, and an initial-carry
    # leaf without grad whose chain matters (docs/bugs.md#torch-while-loop-drops-carry-cotangent).
    "while_loop_chain_of_leaf_without_grad_matters": lambda model, case, dtype: _carry_chain_cut_matters(
        model, case, dtype, buffer=True
    ),
    # Some final-carry leaf reaches the loss only through an unweighted sum, so the backward seeds the
    # scan with an expanded (stride-0) cotangent: the trigger itself, whatever the loss is called
    # (docs/bugs.md#torch-inductor-scan-expanded-carry-cotangent).
    # Here: stride 0 along a dim of size >= 2 (several lanes share one value).
    "final_carry_cotangent_expanded": lambda model, case, dtype: any(
        lanes >= 2 for lanes in expanded_carry_cotangents(model, case)
    ),
    # Two or more final-carry leaves get expanded cotangents, of any size: stride-0 views of one
    # scalar tangent, which scan's functionalization sees as aliased inputs.
    "final_carry_cotangents_expanded_twice": lambda model, case, dtype: (
        len(expanded_carry_cotangents(model, case)) >= 2
    ),
    # Some recurrence (one scan) carries several leaves (each an expanded cotangent under an
    # unweighted sum). A stacked model of one-leaf layers (rnn2) has none.
    "several_carry_leaves_in_a_recurrence": lambda model, case, dtype: any(
        len(carry) >= 2 for carry in recurrence_carries(model, case)
    ),
    # torch_xla's scan traces the step with every carry leaf requiring grad and x requiring grad when
    # xs' does, then back-propagates ones from every output: an output (new carry leaf or y) that
    # depends on none of them has no grad_fn (torch_xla/experimental/scan.py value_and_grad_partitioned).
    "step_output_without_grad": lambda model, case, dtype: _step_graph(model, case)[0],
    # Some carry leaf reaches no step output that has a grad_fn: the step's backward returns None for
    # it, which the reverse scan's flattening drops, so its carry is one leaf short
    # (torch_xla/experimental/scan.py _scan_impl_flat's assertion).
    "carry_leaf_unread_by_step": lambda model, case, dtype: _step_graph(model, case)[1],
    # A step output is a closed-over parameter itself (y = p, c' = p): AOTAutograd's metadata
    # collection meets the captured tensor as a tangent (torch_xla_scan_closure).
    "step_returns_a_parameter": lambda model, case, dtype: _step_graph(model, case)[2],
    # Two or more recurrences (scans) in one program: stacked or bidirectional layers.
    "several_recurrences": lambda model, case, dtype: len(recurrence_carries(model, case)) >= 2,
    # The step's backward returns one computed tensor (not a cotangent handed in) as the gradient of two
    # differentiated inputs (c' = c + x, x from xs', c' read twice): torch 2.9.0's create_bw_fn clones
    # gradients that alias its inputs, not one returned twice (_higher_order_ops/utils.py).
    "step_gradient_returned_twice": lambda model, case, dtype: _step_gradient_returned_twice(model, case),
    # Some a ** b with base and exponent both differentiated meets an exponent entry exactly 0 at a base
    # > 0: torch's pow_backward_self (FunctionsManual.cpp) is where(b == 0, 0, grad * b * a^(b-1)), a
    # constant in b there, so the double backward loses d/db of df/da (1/a): torch's H v is wrong.
    "pow_exponent_exactly_zero": lambda model, case, dtype: _pow_exponent_exactly_zero(model, case),
}
"""Case predicates that entries name in affects.conditions. Add one here for a new bug class."""


class _Reads(dict):
    """A params mapping that records which names a function reads."""

    def __init__(self, params: Mapping) -> None:
        super().__init__(params)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def _all(self):
        self.read.update(self.keys())

    def items(self):
        self._all()
        return super().items()

    def values(self):
        self._all()
        return super().values()

    def __iter__(self):
        self._all()
        return super().__iter__()


def differentiated_sizes(model: Model, case: Case) -> tuple[dict[str, int], dict[str, int]]:
    """(element counts of the differentiated tensors the step reads: parameters and initial-carry
    leaves with grad; element counts of the tensors whose gradients a backward computes upstream of
    the loop: parameters the prologue reads, xs when differentiated, and the prologue's output
    xs' when anything upstream is), found by running the numpy prologue and one step. A model of
    several recurrences (Model.forward) has no single body: ({}, {})."""
    ops = numpy_ops()
    upstream: dict[str, int] = {}
    if model.forward is not None:
        return {}, upstream
    x0 = None
    if case.xs is not None:
        xs = case.xs
        if model.prologue is not None:
            reads = _Reads(case.params)
            xs = model.prologue(ops, reads, case.xs)
            upstream.update({p: int(np.size(case.params[p])) for p in reads.read})
        if case.xs_requires_grad:
            upstream["xs"] = int(np.size(case.xs))
        if upstream and model.prologue is not None:
            upstream["xs'"] = int(np.size(xs))
        x0 = xs[0]
    reads = _Reads(case.params)
    model.step(ops, reads, tuple(case.carry0), x0)
    body = {p: int(np.size(case.params[p])) for p in reads.read}
    body.update(
        {
            f"carry0.{n}": int(np.size(c))
            for n, c, g in zip(model.carry_names, case.carry0, case.carry0_requires_grad)
            if g
        }
    )
    return body, upstream


def recurrence_carries(model: Model, case: Case) -> list[tuple]:
    """The initial carry of each recurrence the model runs (one for a single recurrence; one per
    layer or direction of a Model.forward), found by running the numpy forward."""
    if model.forward is None:
        return [tuple(case.carry0)]
    ops, seen = numpy_ops(), []
    loop = loop_recur(ops)

    def recording(step, params, carry0, xs, length):
        seen.append(tuple(carry0))
        return loop(step, params, carry0, xs, length)

    run_forward(ops, model, case.params, carry0=case.carry0, xs=case.xs, length=case.length, recur=recording)
    return seen


def expanded_carry_cotangents(model: Model, case: Case) -> list[int]:
    """For each final-carry leaf the loss seeds with an expanded cotangent (a gradient with a stride-0
    dim, as torch's backward of an unweighted sum gives: expand of a scalar), the largest size of
    its stride-0 dims (1 for a one-element leaf); leaves with other cotangents are left out.
    Runs the numpy forward, then the model's loss in eager torch on the final carry as leaves, and
    reads the strides of each leaf's incoming gradient. A sum that inductor alone turns into an
    expand (e.g. of c * ones_like(c)) is not seen here."""
    import torch

    with forward_pass():
        ys, carry = rollout(numpy_ops(), model, case.params, carry0=case.carry0, xs=case.xs, length=case.length)
    leaves = [_leaf(c, True) for c in carry]
    expanded: list[int] = []

    def seen(grad) -> None:
        lanes = [n for stride, n in zip(grad.stride(), grad.shape) if stride == 0]
        if lanes:
            expanded.append(max(lanes))

    for leaf in leaves:
        if leaf.requires_grad:  # an integer leaf has no gradient to see
            leaf.register_hook(seen)
    consts = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in case.consts.items()}
    loss = model.loss(torch_ops(), consts, _leaf(ys), tuple(leaves))
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        loss.backward()
    return expanded


def _step_graph(model: Model, case: Case) -> tuple[bool, bool, bool]:
    """One eager torch step at the case's values, with every carry leaf and parameter requiring
    grad and x when xs' does (what torch_xla's scan traces with grad; parameters travel in the carry
    in torch_xla_scan): (some output has no grad_fn; some carry leaf reaches no output that has
    one; some output is a parameter tensor itself). A model of several recurrences (Model.forward)
    has no single body: all False."""
    import torch

    if model.forward is not None:
        return False, False, False

    x = None
    if case.xs is not None:
        xs = case.xs if model.prologue is None else model.prologue(numpy_ops(), case.params, case.xs)
        x = _leaf(np.asarray(xs)[0], case.xs_requires_grad or (model.prologue is not None and bool(case.params)))
    carry = tuple(_leaf(c, True) for c in case.carry0)
    params = {k: _leaf(v, True) for k, v in case.params.items()}
    new, y = model.step(torch_ops(), params, carry, x)
    outputs = [o for o in (*new, y) if isinstance(o, torch.Tensor)]
    returns_param = any(o is p for o in outputs for p in params.values())
    with_grad = [o for o in outputs if o.requires_grad]
    differentiated = [c for c in carry if c.requires_grad]  # an integer leaf has no gradient
    grads = (
        torch.autograd.grad(with_grad, differentiated, [torch.ones_like(o) for o in with_grad], allow_unused=True)
        if with_grad
        else [None] * len(differentiated)
    )
    return len(with_grad) < len(outputs), any(g is None for g in grads), returns_param


def _step_gradient_returned_twice(model: Model, case: Case) -> bool:
    """One eager torch step, carry leaves and x differentiated as the case (or its prologue) does: do two of
    their gradients share storage that no output cotangent has? Several recurrences: False."""
    import torch

    if model.forward is not None:
        return False
    wants = case.carry0_requires_grad or (False,) * len(case.carry0)
    leaves = [_leaf(c, bool(g)) for c, g in zip(case.carry0, wants)]
    xs = case.xs if model.prologue is None or case.xs is None else model.prologue(numpy_ops(), case.params, case.xs)
    grad = bool(case.xs_requires_grad or (model.prologue is not None and case.params))
    x = None if xs is None else _leaf(np.asarray(xs)[0], grad)
    params = {k: _leaf(v, True) for k, v in case.params.items()}
    new, y = model.step(torch_ops(), params, tuple(leaves), x)
    outputs = [o for o in (*new, y) if isinstance(o, torch.Tensor) and o.requires_grad]
    inputs = [t for t in (*leaves, x) if t is not None and t.requires_grad]
    if len(inputs) < 2 or not outputs:
        return False
    cotangents = [torch.ones_like(o) for o in outputs]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    handed_in = {c.untyped_storage().data_ptr() for c in cotangents}
    storages = [g.untyped_storage().data_ptr() for g in grads if g is not None and g.numel()]
    return any(s not in handed_in and storages.count(s) >= 2 for s in storages)


def _body_grad_numel_shared_upstream(model: Model, case: Case) -> bool:
    body, upstream = differentiated_sizes(model, case)
    return any(nb == nu for b, nb in body.items() for u, nu in upstream.items() if b != u)


def _carry_chain_cut_matters(model: Model, case: Case, dtype: str, buffer: bool = False) -> bool:
    """Eager torch loops in float64 at the case's values: would the gradient with the carry chain of
    each leaf whose initial value lacks grad cut between steps be judged wrong at `dtype` against the
    true one (check/compare.py, the judge's rule with the true gradient as its oracle)? buffer: a zero ys
    buffer is carried too (a while loop's), so every output but the last loses its cotangent as well."""
    if all(case.carry0_requires_grad or (False,)) and not buffer:
        return False
    loss, full = _loop_gradient(model, case, cut=False)
    _, cut = _loop_gradient(model, case, cut=True, cut_outputs=buffer)
    names = list(full)
    tol = at_loss_scale(tolerance(dtype, OracleKind.DUAL), loss)
    return verdict(0.0, compare_grads(cut, full, names, tol=tol), tol) in (Status.GRAD_MISMATCH, Status.MISSING_GRAD)


def _loop_gradient(
    model: Model, case: Case, cut: bool, cut_outputs: bool = False
) -> tuple[float, dict[str, np.ndarray]]:
    """(loss, {compared input: gradient}) of the model's eager torch loops in float64; cut: every
    recurrence detaches, before each step after the first, the carry leaves whose initial value has
    no grad (a model of several recurrences cuts each by its own initial carry); cut_outputs: every
    step's output but the last is detached too (what a cut ys buffer leaves)."""
    import torch

    ops = torch_ops()

    params = {k: _leaf(v, True) for k, v in case.params.items()}
    wants = case.carry0_requires_grad or (False,) * len(case.carry0)
    carry0 = tuple(_leaf(c, bool(g)) for c, g in zip(case.carry0, wants))
    xs = None if case.xs is None else _leaf(case.xs, case.xs_requires_grad)

    def recur(step, params, carry0, xs, length):
        keep = [isinstance(c, torch.Tensor) and c.requires_grad for c in carry0]
        carry, ys = tuple(carry0), []
        inputs = (None,) * length if xs is None else ops.unstack(xs)
        for t in range(length):
            if cut and t > 0:
                carry = tuple(c if k else c.detach() for c, k in zip(carry, keep))
            carry, y = step(ops, params, carry, inputs[t])
            ys.append(y.detach() if cut_outputs and t < length - 1 else y)
        return ops.stack(ys), carry

    ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
    consts = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in case.consts.items()}
    loss = model.loss(ops, consts, ys, carry)
    by_name = {**params, **{f"carry0.{n}": c for n, c in zip(model.carry_names, carry0)}, "xs": xs}
    names = case.wrt_names(model.carry_names)
    inputs = [by_name[n] for n in names]
    grads = torch.autograd.grad(loss, inputs, allow_unused=True) if loss.requires_grad else [None] * len(inputs)
    return float(loss.detach()), {
        n: np.zeros(tuple(i.shape)) if g is None else g.detach().numpy() for n, i, g in zip(names, inputs, grads)
    }


def _pow_exponent_exactly_zero(model: Model, case: Case) -> bool:
    """The eager torch forward in float64 at the case's values, the compared inputs requiring grad,
    watched by a TorchFunctionMode: does a Tensor ** Tensor whose base and exponent both require grad
    have an exponent entry exactly 0 where the base is > 0?"""
    import torch
    from torch.overrides import TorchFunctionMode

    seen: list[bool] = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if name in ("pow", "__pow__", "__rpow__") and len(args) == 2:
                base, exponent = args if name != "__rpow__" else args[::-1]
                if all(isinstance(t, torch.Tensor) and t.requires_grad for t in (base, exponent)):
                    at = (exponent.detach() == 0) & (base.detach() > 0)
                    seen.append(bool(torch.any(at)))
            return func(*args, **(kwargs or {}))

    names = case.wrt_names(model.carry_names)
    wants = case.carry0_requires_grad or (False,) * len(case.carry0)
    params = {k: _leaf(v, k in names) for k, v in case.params.items()}
    carry0 = tuple(_leaf(c, bool(g)) for c, g in zip(case.carry0, wants))
    xs = None if case.xs is None else _leaf(case.xs, case.xs_requires_grad)
    ops = torch_ops()
    with Watch():
        run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=loop_recur(ops))
    return any(seen)


def _leaf(a, grad: bool = False):
    """A float64 torch tensor of `a` (an eager step's input), requiring grad or not; an integer
    array (token ids, a counter) as an int64 tensor, never requiring grad."""
    import torch

    if is_integer(a):
        return torch.tensor(np.asarray(a), dtype=torch.int64)

    # contiguous: a numpy forward of a Model.reverse model hands on flipped views (negative strides)
    return torch.tensor(np.ascontiguousarray(a, dtype=np.float64), requires_grad=grad)
