"""Export a fuzzed failure as a standalone script: only the failing framework and numpy, the exact
inputs as float64 literals, the expected values from rnnbench's oracle (check/oracle.py: dual numbers,
exact to rounding, unless the script's ORACLE says otherwise), and
(for torch scan) the same step in a plain torch loop. It prints got / want per input and exits 1
while the bug reproduces, 0 once it is fixed: the file to attach to an upstream report."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from rnnbench import losses
from rnnbench.fuzz.cases import FuzzCase
from rnnbench.losses import LossForm
from rnnbench.fuzz.grammar import Body

_TORCH_HEAD = '''import math
import sys
import types

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
ops = types.SimpleNamespace(sin=torch.sin, cos=torch.cos, tanh=torch.tanh, sigmoid=torch.sigmoid,
                            exp=torch.exp, matmul=torch.matmul, sum=torch.sum)
'''

_JAX_HEAD = '''import math
import sys
import types

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp

ops = types.SimpleNamespace(sin=jnp.sin, cos=jnp.cos, tanh=jnp.tanh, sigmoid=jax.nn.sigmoid,
                            exp=jnp.exp, matmul=jnp.matmul, sum=jnp.sum)
'''

_TORCH_RUN = '''

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
'''

_JAX_RUN = '''

def loss_fn(diff, rest):
    inputs = {**rest, **diff}
    params = {k: inputs[k] for k in PARAMS}
    carry = tuple(inputs[f"carry0.{c}"] for c in CARRY_NAMES)
    if MODE == "scan":
        xs = inputs["xs"] if HAS_XS else jnp.zeros((LENGTH, 1))
        carry, ys = jax.lax.scan(lambda c, x: step(ops, params, c, x if HAS_XS else None), carry, xs)
    else:
        out = []
        for t in range(LENGTH):
            carry, y = step(ops, params, carry, inputs["xs"][t] if HAS_XS else None)
            out.append(y)
        ys = jnp.stack(out)
    return LOSS(ops, {k: jnp.asarray(v) for k, v in CONSTS.items()}, ys, carry)


values = {**PARAMS, **{f"carry0.{c}": v for c, v in zip(CARRY_NAMES, CARRY0)}, **({"xs": XS} if HAS_XS else {})}
diff = {k: jnp.asarray(v) for k, v in values.items() if k in WRT}
rest = {k: jnp.asarray(v) for k, v in values.items() if k not in WRT}
if SECOND_ORDER:
    out = jax.jvp(lambda d: jax.grad(loss_fn)(d, rest), (diff,), ({k: jnp.asarray(V[k]) for k in WRT},))[1]
else:
    out = jax.grad(loss_fn)(diff, rest)
got = {k: np.asarray(v) for k, v in out.items()}
reference = None
'''



@dataclass(frozen=True)
class Script:
    """The framework-specific parts of a repro script: what it needs, its imports, how it runs."""

    needs: str
    head: str
    run: str


TORCH_SCRIPT = Script("torch", _TORCH_HEAD, _TORCH_RUN)
JAX_SCRIPT = Script("jax", _JAX_HEAD, _JAX_RUN)

# driver -> (script, loop or scan, compiled). Drivers not listed get no script (the report says so).
TEMPLATES: dict[str, tuple[Script, str, bool]] = {
    "torch_loop": (TORCH_SCRIPT, "loop", False),
    "torch_loop_compiled": (TORCH_SCRIPT, "loop", True),
    "torch_scan": (TORCH_SCRIPT, "scan", False),
    "torch_scan_compiled": (TORCH_SCRIPT, "scan", True),
    "jax_loop": (JAX_SCRIPT, "loop", False),
    "jax_lax_scan": (JAX_SCRIPT, "scan", True),
}

_COMPARE = '''
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
'''


def _literal(a) -> str:
    return "np.array(" + np.array2string(np.asarray(a, dtype=np.float64), precision=17, separator=", ",
                                           floatmode="unique", threshold=1 << 30, max_line_width=100) + ")"


def _dict(d: Mapping[str, np.ndarray]) -> str:
    return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in d.items()) + "}"


def loss_source(form: LossForm) -> str:
    """The form's loss function and the loss functions it calls, as rnnbench defines them."""
    namespace = vars(losses)
    called = [namespace[n] for n in form.loss.__code__.co_names if callable(namespace.get(n)) and n in FORM_FUNCTIONS]
    return "\n\n".join(inspect.getsource(f) for f in (*called, form.loss))


FORM_FUNCTIONS = {f.loss.__name__ for f in losses.FORMS.values()}


def export(path: Path, fc: FuzzCase, driver: str, second_order: bool, status: str, tolerance: float,
           absolute_scale: float = 0.0) -> Optional[Path]:
    """Write the script for `driver` on the (minimal) body of `fc`; None where no template exists."""
    if driver not in TEMPLATES:
        return None
    script, mode, compiled = TEMPLATES[driver]
    body: Body = fc.body
    loss_form = losses.form_named(body.loss)
    case = fc.case
    wrt = case.wrt_names(fc.model.carry_names)
    if second_order:
        oracle, kind = fc.hvp_oracle(), str(fc.hvp_oracle().kind)
        v, want = oracle.v, oracle.want
        bound = {n: np.asarray((oracle.error or {}).get(n, np.zeros(np.shape(w)))) for n, w in oracle.want.items()}
    else:
        kind = str(fc.oracle.kind)
        v, want, bound = None, dict(fc.oracle.grads), {n: fc.oracle.error_of(n) for n in fc.oracle.grads}
    data = [
        f"DRIVER = {driver!r}",
        f"WHAT = {status!r}",
        f"MODE, COMPILED, SECOND_ORDER = {mode!r}, {compiled}, {second_order}",
        f"CLONE_CARRY = {compiled}  # inductor also needs every carry leaf cloned",
        f"LENGTH, HAS_XS = {body.length}, {body.has_xs}",
        f"CARRY_NAMES = {list(fc.model.carry_names)!r}",
        f"WRT = {wrt!r}",
        f"PARAMS = {_dict(case.params)}",
        f"CARRY0 = [{', '.join(_literal(c) for c in case.carry0)}]",
        f"XS = {_literal(case.xs) if case.xs is not None else None}",
        f"CONSTS = {_dict(case.consts)}  # the loss's fixed weights",
        f"LOSS = {loss_form.loss.__name__}",
        f"V = {_dict(v) if v is not None else None}  # the direction of the Hessian-vector product",
        f"ORACLE = {kind!r}  # rnnbench's oracle (docs/checking.md, the oracle ladder): its values for the same",
        "# step and loss in numpy:",
        f"WANT = {_dict(want)}",
        "# and their bounds (absolute, per entry): a difference within TOLERANCE * scale + bound is no evidence",
        f"WANT_ERROR = {_dict(bound)}",
        f"TOLERANCE, ABS_SCALE = {tolerance!r}, {absolute_scale!r}",
    ]
    doc = (f'"""Reproducer exported by rnnbench fuzz: {driver} gives {status} on this step body.\n'
           f"Needs only {script.needs} and numpy. Exits 1 while the bug reproduces, 0 once it is fixed.\n"
           f'Loss ({body.loss}): {loss_form.summary}, after LENGTH steps."""\n')
    text = "\n".join([
        "#!/usr/bin/env python", doc, script.head,
        "\n# the fuzzed step body", body.source(), f"# the loss ({body.loss})", loss_source(loss_form), *data,
        script.run, _COMPARE])
    path.write_text(text)
    return path
