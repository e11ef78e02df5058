"""Export a fuzzed failure as a standalone script: only the failing framework and numpy, the exact
inputs as float64 literals, the expected values from rnnbench's oracle (check/oracles/oracle.py: dual numbers,
exact to rounding, unless the script's ORACLE says otherwise), and
(for torch scan) the same step in a plain torch loop. It prints got / want per input and exits 1
while the bug reproduces, 0 once it is fixed: the file to attach to an upstream report."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from rnnbench import losses
from rnnbench.drivers.base import Driver
from rnnbench.fuzz.cases import FuzzCase
from rnnbench.fuzz.grammar import Body
from rnnbench.losses import LossForm
from rnnbench.model import is_integer

_COMPARE = """
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
"""


def _literal(a) -> str:
    integer = is_integer(a)  # token ids stay integer: the script indexes with them
    return (
        "np.array("
        + np.array2string(
            np.asarray(a, dtype=np.int64 if integer else np.float64),
            precision=17,
            separator=", ",
            floatmode="unique",
            threshold=1 << 30,
            max_line_width=100,
        )
        + (", dtype=np.int64)" if integer else ")")
    )


def _dict(d: Mapping[str, np.ndarray]) -> str:
    return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in d.items()) + "}"


def loss_source(form: LossForm) -> str:
    """The form's loss function and the loss functions it calls, as rnnbench defines them."""
    namespace = vars(losses)
    called = [namespace[n] for n in form.loss.__code__.co_names if callable(namespace.get(n)) and n in FORM_FUNCTIONS]
    return "\n\n".join(inspect.getsource(f) for f in (*called, form.loss))


FORM_FUNCTIONS = {f.loss.__name__ for f in losses.FORMS.values()}


def export(
    path: Path,
    fc: FuzzCase,
    driver: Driver,
    *,
    second_order: bool,
    status: str,
    tolerance: float,
    absolute_scale: float = 0.0,
) -> Path | None:
    """Write the script for `driver` on the (minimal) body of `fc`; None where no template exists."""
    script, mode, compiled = driver.framework.repro, driver.repro, driver.compiled
    if script is None or mode is None:
        return None
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
        f"DRIVER = {driver.name!r}",
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
    doc = (
        f'"""Reproducer exported by rnnbench fuzz: {driver.name} gives {status} on this step body.\n'
        f"Needs only {script.needs} and numpy. Exits 1 while the bug reproduces, 0 once it is fixed.\n"
        f'Loss ({body.loss}): {loss_form.summary}, after LENGTH steps."""\n'
    )
    text = "\n".join(
        [
            "#!/usr/bin/env python",
            doc,
            script.head,
            *([script.edge_ops] if body.plant or body.op_classes() != {"smooth"} else []),
            "\n# the fuzzed step body",
            body.source(),
            f"# the loss ({body.loss})",
            loss_source(loss_form),
            *data,
            script.run,
            _COMPARE,
        ]
    )
    path.write_text(text)
    return path
