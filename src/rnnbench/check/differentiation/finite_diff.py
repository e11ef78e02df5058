"""float64 central finite differences of a model's numpy forward, with their own error bars: the
oracle that assumes nothing, and says how far it can be trusted.

Per scalar entry x_i of an input, with a step h_i chosen from the entry's own scale (below):
    D(h)  = (-f(x+2h) + 8 f(x+h) - 8 f(x-h) + f(x-2h)) / 12h        truncation C h^4
    value = D(h) + (D(h) - D(2h)) / 15                               one Richardson step, O(h^6)
    error = |D(h) - D(2h)| + |D(2h) - D(4h)| + ROUNDOFF_SAFETY * eps * sum_k |w_k f_k| / 12h
In the asymptotic regime D(h) - D(2h) ~ -15 C h^4 and D(2h) - D(4h) ~ 16 times that, so the bound
is ~250x the extrapolated value's own truncation error; outside it (a step too large for the
function's features, e.g. sin(1e5 p)) the three differences are unrelated and large, and one
coincidentally small difference cannot fake a small bound, which it can with two levels. The last
term bounds cancellation in the differences (a loss that sums many terms is noisier than eps |f|,
hence the safety factor). 8 forward passes per entry (points +-h, +-2h, +-4h, +-8h).

Step: h_i = REL_STEP * s_i with s_i = max(|x_i|, SCALE_FLOOR * max|x|) (SCALE_FLOOR alone for an
all-zero input). An absolute step (the old h = 1e-3) is as large as a parameter of 1e-3 itself and
10% of a temperature of 1e-2 (tanh(c a / p) over 16 steps: truncation error 8.6e-4 relative, a
false grad_mismatch on every exact driver; tests/test_false_alarms.py). An entry whose error bound
is still above REFINE_TARGET of the case's gradient scale is retried at smaller steps (truncation
dominates) or larger ones (roundoff dominates), keeping the step with the smallest bound, widened
to cover its neighbouring step's interval (a step that aliases the function's features cannot
agree with that one by accident).

Smoothness probe: all of the above assumes the loss is smooth at the scale of the step. A loss with
features far below it (a chaotic recurrence: sin of a carry that grows over 16 steps, whose true
derivative is 1e13 while every step from h down to h/64 sees a smooth envelope with derivative 1e7)
fakes a small bound. So every entry is also differentiated at PROBE_FRACTION of its step (2 more
forward passes, first-order central difference); where that disagrees with the value beyond the
bound plus the probe's own roundoff, the error model is refuted and the bound is infinite: the
judge can then only say ok (within tolerance) or cannot_decide, never mismatch.

stop_gradient: every derivative here is taken with the step's stop_gradient outputs held at their
values at the case's own inputs (frozen_at_base), so the differenced function is the one autodiff
differentiates; differencing the plain forward would see a derivative through stop_gradient.

The judge (check/compare.py) compares a driver against `value` with the tolerance OR the error bound,
whichever is larger, and says "cannot decide" where only the bound separates them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from rnnbench.model import Case, Model, reference_loss
from rnnbench.ops import frozen_stop_gradients

REL_STEP = 5e-4  # eps^(1/5) ~ 7e-4 balances a 5-point stencil's truncation against its roundoff
SCALE_FLOOR = 1e-3  # an entry at (or near) 0 takes its step from its input's largest entry
ROUNDOFF_SAFETY = 100.0  # a float64 loss summing N terms carries ~sqrt(N) eps |f| noise, not eps |f|
REFINE_TARGET = 1e-10  # retry an entry whose bound exceeds this fraction of the largest gradient
REFINE_FACTORS = (1 / 8, 1 / 64)  # step multipliers tried, inverted when roundoff dominates
PROBE_FRACTION = 1e-3  # the smoothness probe's step, as a fraction of the entry's base step
EPS = float(np.finfo(np.float64).eps)


def _loss_with(model: Model, case: Case, name: str, value: np.ndarray) -> float:
    if name == "xs":
        return reference_loss(model, case, xs=value)
    if name.startswith("carry0."):
        leaf = model.carry_names.index(name.split(".", 1)[1])
        carry0 = tuple(value if i == leaf else c for i, c in enumerate(case.carry0))
        return reference_loss(model, case, carry0=carry0)
    return reference_loss(model, case, params={**case.params, name: value})


@contextlib.contextmanager
def frozen_at_base(model: Model, case: Case) -> Iterator[float]:
    """Inside, the numpy forward's stop_gradient outputs are their values at the case's own inputs,
    whatever inputs a pass perturbs (rnnbench.ops.frozen_stop_gradients); yields the base loss.
    The base pass runs first, on entry, so the recorded values are the unperturbed ones."""
    with frozen_stop_gradients():
        yield reference_loss(model, case)


def input_value(model: Model, case: Case, name: str) -> np.ndarray:
    if name == "xs":
        return case.xs
    if name.startswith("carry0."):
        return case.carry0[model.carry_names.index(name.split(".", 1)[1])]
    return case.params[name]


def entry_steps(x: np.ndarray) -> np.ndarray:
    """The base step of every entry of input x (see the module docstring)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    floor = SCALE_FLOOR * float(a.max()) if a.size and a.max() > 0 else SCALE_FLOOR
    return REL_STEP * np.maximum(a, floor)


def derivative(f: Callable[[float], float], x0: float, h: float) -> tuple[float, float, float]:
    """(value, truncation bound, roundoff bound) of f'(x0) at step h (module docstring)."""
    fp = {k: f(x0 + k * h) for k in (1, 2, 4, 8)}
    fm = {k: f(x0 - k * h) for k in (1, 2, 4, 8)}

    def stencil(k: int) -> float:  # D(k h)
        return (-fp[2 * k] + 8 * fp[k] - 8 * fm[k] + fm[2 * k]) / (12 * k * h)

    d1, d2, d4 = stencil(1), stencil(2), stencil(4)
    noise = ROUNDOFF_SAFETY * EPS * (abs(fp[2]) + 8 * abs(fp[1]) + 8 * abs(fm[1]) + abs(fm[2])) / (12 * h)
    return d1 + (d1 - d2) / 15, abs(d1 - d2) + abs(d2 - d4), noise


Bounded = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]  # (values, absolute error bounds) by input name


def finite_differences(model: Model, case: Case, names: Sequence[str] | None = None) -> Bounded:
    """d loss / d input with error bounds for every input in `names` (default: case.wrt_names());
    check.oracles.oracle.finite_difference_oracle makes them a rung of the ladder."""
    names = case.wrt_names(model.carry_names) if names is None else list(names)
    with frozen_at_base(model, case):
        return _finite_differences(model, case, names)


def _finite_differences(model: Model, case: Case, names: list[str]) -> Bounded:
    grads, errors, dominant, bases = {}, {}, {}, {}
    for name in names:
        base = np.asarray(input_value(model, case, name), dtype=np.float64)
        steps = entry_steps(base)
        grad, err, trunc_dominates = np.zeros_like(base), np.zeros_like(base), np.zeros(base.shape, dtype=bool)
        for idx in np.ndindex(base.shape):
            value, trunc, noise = derivative(
                _entry_function(model, case, name, base=base, idx=idx), float(base[idx]), float(steps[idx])
            )
            grad[idx], err[idx], trunc_dominates[idx] = value, trunc + noise, trunc >= noise
        grads[name], errors[name], dominant[name], bases[name] = grad, err, trunc_dominates, (base, steps)
    scale = max((float(np.max(np.abs(g))) for g in grads.values() if g.size), default=0.0)
    for name in names:  # refine the entries whose bound is large against the case's gradients
        base, steps = bases[name]
        for idx in np.argwhere(errors[name] > REFINE_TARGET * scale):
            idx = tuple(int(i) for i in idx)
            f = _entry_function(model, case, name, base=base, idx=idx)
            tried = [(grads[name][idx], errors[name][idx])]
            for factor in REFINE_FACTORS:
                value, trunc, noise = derivative(
                    f, float(base[idx]), float(steps[idx]) * (factor if dominant[name][idx] else 1 / factor)
                )
                tried.append((value, trunc + noise))
            best = min(range(len(tried)), key=lambda j: tried[j][1])
            # A step that aliases the function's features (sin(1e5 p) sampled every ~2 pi) can look
            # self-consistent; its neighbouring step cannot agree with it by the same accident.
            neighbour = best + 1 if best + 1 < len(tried) else best - 1
            grads[name][idx] = tried[best][0]
            errors[name][idx] = max(tried[best][1], abs(tried[best][0] - tried[neighbour][0]) + tried[neighbour][1])
    for name in names:
        base, steps = bases[name]
        for idx in np.ndindex(base.shape):
            if not smooth_below_step(
                _entry_function(model, case, name, base=base, idx=idx),
                float(base[idx]),
                PROBE_FRACTION * float(steps[idx]),
                value=grads[name][idx],
                bound=errors[name][idx],
            ):
                errors[name][idx] = np.inf
    return grads, errors


def smooth_below_step(f: Callable[[float], float], x0: float, delta: float, *, value: float, bound: float) -> bool:
    """Whether a central difference at the much smaller step `delta` agrees with `value` +- `bound`
    (module docstring). Its truncation error, O(delta^2) times the third derivative, is far below
    `bound` for a loss smooth at the larger step; its roundoff gets the stencil's safety factor."""
    fp, fm = f(x0 + delta), f(x0 - delta)
    step = (x0 + delta) - (x0 - delta)  # the representable step, not 2 delta
    if not (np.isfinite(fp) and np.isfinite(fm)) or step == 0:
        return False
    noise = ROUNDOFF_SAFETY * EPS * (abs(fp) + abs(fm)) / step
    return abs((fp - fm) / step - value) <= bound + noise


def _entry_function(model: Model, case: Case, name: str, *, base: np.ndarray, idx: tuple) -> Callable[[float], float]:
    def f(value: float) -> float:
        x = base.copy()
        x[idx] = value
        return _loss_with(model, case, name, x)

    return f


def one_sided(model: Model, case: Case, name: str, idx: tuple) -> tuple[float, float] | None:
    """(value, error bound) of d loss / d input[idx] where the two one-sided derivatives agree (the
    loss is differentiable there, as relu(z) - relu(-z) = z is at its ops' kink), else None (a
    true kink: |z| at 0, left -1 and right 1). Each side is a second-order one-sided difference,
    at the entry's step h and at h / 4: a smooth loss's gap between the sides shrinks 16-fold
    (truncation ~h^2), a kink's stays its jump. The bound is the larger gap plus the roundoff."""
    base = np.asarray(input_value(model, case, name), dtype=np.float64)
    with frozen_at_base(model, case) as f0:
        f = _entry_function(model, case, name, base=base, idx=idx)
        x0, h0 = float(base[idx]), float(entry_steps(base)[idx])
        sides = []
        for h in (h0, h0 / 4):
            fp, fm = f(x0 + h), f(x0 - h)
            right = (-3 * f0 + 4 * fp - f(x0 + 2 * h)) / (2 * h)
            left = (3 * f0 - 4 * fm + f(x0 - 2 * h)) / (2 * h)
            noise = ROUNDOFF_SAFETY * EPS * 8 * max(abs(f0), abs(fp), abs(fm)) / h
            sides.append((right, left, noise))
    (r1, l1, _), (r4, l4, noise) = sides
    gap_h, gap_quarter = abs(r1 - l1), abs(r4 - l4)
    if not all(np.isfinite(v) for v in (r1, l1, r4, l4)) or gap_quarter > max(gap_h / 4, noise):
        return None
    return (r4 + l4) / 2, gap_h + noise
