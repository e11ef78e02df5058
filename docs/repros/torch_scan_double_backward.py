#!/usr/bin/env python
"""Reproducer exported by rnnbench fuzz: torch_scan gives known_issue:torch-scan-double-backward-drops-saved-values on this step body.
Needs only torch and numpy. Exits 1 while the bug reproduces, 0 once it is fixed.
Loss (weighted): sum(ys * wy) + sum_i sum(c_i * wc_i), fixed random weights (the fuzzer's and the API's default), after LENGTH steps."""

import math
import sys
import types

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
ops = types.SimpleNamespace(sin=torch.sin, cos=torch.cos, tanh=torch.tanh, sigmoid=torch.sigmoid,
                            exp=torch.exp, matmul=torch.matmul, sum=torch.sum)


# the fuzzed step body
def step(ops, params, carry, x):
    c0, = carry
    W = params['W']
    p1 = params['p1']
    return (ops.matmul(W, p1),), c0

# the loss (weighted)
def ys_only(ops, consts, ys, carry):
    return ops.sum(ys * consts["wy"])


def carry_only(ops, consts, ys, carry):
    total = ops.sum(carry[0] * consts["wc0"])
    for i, leaf in enumerate(carry[1:], start=1):
        total = total + ops.sum(leaf * consts[f"wc{i}"])
    return total


def weighted(ops, consts, ys, carry):
    """sum(ys * wy) + sum_i sum(c_i * wc_i): every output and final carry leaf reaches the loss."""
    return ys_only(ops, consts, ys, carry) + carry_only(ops, consts, ys, carry)

DRIVER = 'torch_scan'
WHAT = 'known_issue:torch-scan-double-backward-drops-saved-values'
MODE, COMPILED, SECOND_ORDER = 'scan', False, True
CLONE_CARRY = False  # inductor also needs every carry leaf cloned
LENGTH, HAS_XS = 1, False
CARRY_NAMES = ['c0']
WRT = ['p1', 'W', 'carry0.c0']
PARAMS = {'p1': np.array([-1.5707963267948966]), 'W': np.array([[0.8757355126527377]])}
CARRY0 = [np.array([0.001])]
XS = None
CONSTS = {'wy': np.array([[-0.7825151517794822]]), 'wc0': np.array([-0.9362329267967644])}  # the loss's fixed weights
LOSS = weighted
V = {'p1': np.array([-0.15703568834243353]), 'W': np.array([[0.5156274966050423]]), 'carry0.c0': np.array([0.17803504832053063])}  # the direction of the Hessian-vector product
ORACLE = 'dual_hvp'  # rnnbench's oracle (docs/checking.md, the oracle ladder): its values for the same
# step and loss in numpy:
WANT = {'p1': np.array([-0.4827474402834274]), 'W': np.array([[0.14702198210838108]]), 'carry0.c0': np.array([0.])}
# and their bounds (absolute, per entry): a difference within TOLERANCE * scale + bound is no evidence
WANT_ERROR = {'p1': np.array([0.]), 'W': np.array([[0.]]), 'carry0.c0': np.array([0.])}
TOLERANCE, ABS_SCALE = 1e-09, 0.001287101489866738


def loss_loop(inputs):
    """The plain loop: the reference formulation in the same framework."""
    params = {k: inputs[k] for k in PARAMS}
    carry = tuple(inputs[f"carry0.{c}"] for c in CARRY_NAMES)
    ys = []
    for t in range(LENGTH):
        carry, y = step(ops, params, carry, inputs["xs"][t] if HAS_XS else None)
        ys.append(y)
    return loss_of(torch.stack(ys), carry)


def loss_scan(inputs):
    from torch._higher_order_ops.scan import scan

    params = {k: inputs[k] for k in PARAMS}
    xs = inputs["xs"] if HAS_XS else torch.zeros(LENGTH, 1)

    def combine(carry, x):
        new, y = step(ops, params, carry, x if HAS_XS else None)
        # scan forbids outputs that alias its inputs (carry leaves, x, closed-over parameters)
        lifted = (*carry, x, *params.values())
        new = tuple(n.clone() if CLONE_CARRY or any(n is i for i in lifted) else n for n in new)
        return new, y.clone()

    carry, ys = scan(combine, tuple(inputs[f"carry0.{c}"] for c in CARRY_NAMES), xs)
    return loss_of(ys, carry)


def loss_of(ys, carry):
    return LOSS(ops, {k: torch.as_tensor(v) for k, v in CONSTS.items()}, ys, carry)


def leaves():
    out = {k: torch.tensor(v) for k, v in {**PARAMS, **{f"carry0.{c}": v for c, v in zip(CARRY_NAMES, CARRY0)}}.items()}
    if HAS_XS:
        out["xs"] = torch.tensor(XS)
    for k in WRT:
        out[k].requires_grad_(True)
    return out


def derivatives(loss_fn, compiled):
    """{name: d loss/d name}, or {name: (H v)[name]} when SECOND_ORDER."""
    if compiled:
        torch._dynamo.config.capture_scalar_outputs = True
        loss_fn = torch.compile(loss_fn, backend="inductor", fullgraph=True)
    inputs = leaves()
    wrt = [inputs[k] for k in WRT]
    grads = torch.autograd.grad(loss_fn(inputs), wrt, create_graph=SECOND_ORDER, allow_unused=True)
    if not SECOND_ORDER:
        return {k: None if g is None else g.detach().numpy() for k, g in zip(WRT, grads)}
    dot = sum((g * torch.as_tensor(V[k])).sum() for k, g in zip(WRT, grads) if g is not None)
    if not torch.is_tensor(dot) or not dot.requires_grad:  # the gradient does not depend on the inputs
        return {k: np.zeros_like(np.asarray(V[k])) for k in WRT}
    hv = torch.autograd.grad(dot, wrt, allow_unused=True)
    return {k: np.zeros_like(np.asarray(V[k])) if h is None else h.numpy() for k, h in zip(WRT, hv)}


got = derivatives(loss_scan if MODE == "scan" else loss_loop, COMPILED)
reference = derivatives(loss_loop, False) if (MODE, COMPILED) != ("loop", False) else None


worst = 0.0
# rnnbench's metric: max |got - want| over an input, beyond the oracle's error bound, relative to
# max(max |want| of that input, 1e-3 x the largest |want| of all inputs, ABS_SCALE)
G = max(float(np.max(np.abs(np.asarray(w)))) for w in WANT.values())
print(f"{DRIVER}, {'second order (H v)' if SECOND_ORDER else 'first order (gradients)'}; rnnbench's verdict: {WHAT}")
for k in WRT:
    g, w = got[k], np.asarray(WANT[k])
    if g is None:
        print(f"  {k:10} got None (no gradient: read as zero)")
        g = np.zeros_like(w)
    scale = max(float(np.max(np.abs(w))), 1e-3 * G, ABS_SCALE) or 1.0
    err = float(np.max(np.abs(np.asarray(g) - w) - np.asarray(WANT_ERROR[k]))) / scale
    worst = max(worst, err)
    ref = "" if reference is None or reference[k] is None else f"  plain loop: {np.asarray(reference[k]).ravel()}"
    print(f"  {k:10} got {np.asarray(g).ravel()}  want {w.ravel()}{ref}  rel err {err:.3g}")
if worst > TOLERANCE:
    print(f"MISMATCH: {DRIVER} is off by {worst:.3g} (normwise, tolerance {TOLERANCE:g}); "
          f"want = rnnbench's {ORACLE} oracle of the same step in numpy")
    sys.exit(1)
print(f"OK: {DRIVER} agrees with rnnbench's {ORACLE} oracle (max rel err {worst:.3g})")
