"""False-alarm campaign through the public API: random user-written recurrences, checked with
`rnnbench.check_recurrence` (finite-difference oracle), with the true gradient computed here by two
autodiff engines (jax and torch, float64, plain Python loops) that must agree.

Each recurrence draws one of eight step templates, sizes, parameter magnitudes log-uniform in
[1e-3, 1] (the temperature template: a divisor of 1e-2..1e-1), a trip count in [5, 16], and with
some probability an unused parameter, a stationary point (a parameter at 0 or pi inside cos),
gradients with respect to xs and to the initial carry.

    python user_recurrences.py --count 200 --out new.jsonl            # the tree on PYTHONPATH
    PYTHONPATH=<old tree>/src python user_recurrences.py --count 200 --out old.jsonl
    python user_recurrences.py --summarize old.jsonl new.jsonl

One JSON line per (recurrence, dtype, driver): its status, and whether the two engines agreed (so
the driver's gradient is known to be right and any alarm on it is false).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Callable

import numpy as np

import rnnbench


def _decay(ops, p, carry, x):
    (h,) = carry
    h = p["a"] * h + p["b"] * x
    return (h,), h


def _rnn(ops, p, carry, x):
    (h,) = carry
    h = ops.tanh(ops.matmul(p["W"], h) + p["U"] * x + p["b"])
    return (h,), h


def _gated(ops, p, carry, x):
    (h,) = carry
    z = ops.sigmoid(p["a"] * h + x)
    h = z * h + (1.0 - z) * ops.tanh(p["b"] * x)
    return (h,), z


def _trig(ops, p, carry, x):
    (h,) = carry
    h = ops.cos(p["w"] * h) * 0.5 + p["s"] * x
    return (h,), ops.sin(h)


def _exp(ops, p, carry, x):
    (h,) = carry
    h = h * ops.exp(-p["a"] * x * x) + p["b"]
    return (h,), h


def _two_carry(ops, p, carry, x):
    h, c = carry
    c = c + ops.sin(h * p["w"]) * x
    h = ops.tanh(c * p["v"])
    return (h, c), h * c


def _stationary(ops, p, carry, x):
    (h,) = carry  # cos(p) at p = 0 or pi: d/dp = -sin(p) vanishes there
    h = ops.cos(p["phase"]) * h + p["a"] * x
    return (h,), h


def _temperature(ops, p, carry, x):
    (h,) = carry  # the loss varies on the scale of p itself (1e-2..1e-1): a fixed FD step of 1e-3 is not small
    h = ops.tanh(h * p["a"] / p["temperature"] + x)
    return (h,), h


TEMPLATES: dict[str, tuple[Callable, dict[str, str], int]] = {
    # name: (step, parameter shapes as "n" / "nn", carry leaves)
    "decay": (_decay, {"a": "n", "b": "n"}, 1),
    "rnn": (_rnn, {"W": "nn", "U": "n", "b": "n"}, 1),
    "gated": (_gated, {"a": "n", "b": "n"}, 1),
    "trig": (_trig, {"w": "n", "s": "n"}, 1),
    "exp": (_exp, {"a": "n", "b": "n"}, 1),
    "two_carry": (_two_carry, {"w": "n", "v": "n"}, 2),
    "stationary": (_stationary, {"phase": "n", "a": "n"}, 1),
    "temperature": (_temperature, {"temperature": "n", "a": "n"}, 1),
}


def draw(index: int) -> dict:
    rng = np.random.default_rng([2026, index])
    name = list(TEMPLATES)[index % len(TEMPLATES)]
    step, shapes, leaves = TEMPLATES[name]
    n = int(rng.integers(1, 5))
    T = int(rng.integers(5, 17))

    def value(shape: tuple) -> np.ndarray:
        magnitude = 10.0 ** rng.uniform(-3, 0, shape)
        return magnitude * rng.choice([-1.0, 1.0], shape)

    params = {k: value((n, n) if s == "nn" else (n,)) for k, s in shapes.items()}
    if name == "temperature":
        params["temperature"] = 10.0 ** rng.uniform(-2, -1, n)
    elif name == "stationary":
        params["phase"] = rng.choice([0.0, math.pi], n)
    elif rng.random() < 0.1:  # a stationary point inside an ordinary template
        params[next(iter(params))][0] = 0.0
    if rng.random() < 0.25:
        params["unused"] = value((n,))
    return dict(name=name, step=step, params=params, carry0=tuple(rng.uniform(-1, 1, n) for _ in range(leaves)),
                xs=rng.uniform(-1, 1, (T, n)), carry0_requires_grad=bool(rng.random() < 0.2),
                xs_requires_grad=bool(rng.random() < 0.2))


def loss_weights(r: dict) -> dict:
    """Fixed random weights on ys (T, n) and on each final carry leaf (n,)."""
    rng = np.random.default_rng(0)
    n = len(r["carry0"][0])
    return {"wy": rng.uniform(-1, 1, (len(r["xs"]), n)), **{f"wc{i}": rng.uniform(-1, 1, n) for i in range(len(r["carry0"]))}}


def rollout(ops, r: dict, params: dict, carry: tuple, xs):
    ys = []
    for t in range(len(xs)):
        carry, y = r["step"](ops, params, carry, xs[t])
        ys.append(y)
    return ops.stack(ys), carry


def loss_of(ops, weights: dict, ys, carry):
    """loss(ops, consts, ys, carry_T) -> scalar, as check_recurrence takes it."""
    total = ops.sum(weights["wy"] * ys)
    for i, c in enumerate(carry):
        total = total + ops.sum(weights[f"wc{i}"] * c)
    return total


def engine_gap(r: dict, weights: dict) -> float:
    """Max relative gap between the float64 gradients of jax and torch (plain loops): the truth is
    settled where they agree."""
    import jax
    import torch

    from rnnbench.ops import jax_ops, torch_ops

    jax.config.update("jax_enable_x64", True)
    names = list(r["params"]) + (["xs"] if r["xs_requires_grad"] else []) + \
        [f"c{i}" for i in range(len(r["carry0"])) if r["carry0_requires_grad"]]
    arrays = {**r["params"], "xs": r["xs"], **{f"c{i}": c for i, c in enumerate(r["carry0"])}}

    def f(ops, a: dict, w: dict):
        carry0 = tuple(a[f"c{i}"] for i in range(len(r["carry0"])))
        ys, carry = rollout(ops, r, {k: a[k] for k in r["params"]}, carry0, a["xs"])
        return loss_of(ops, w, ys, carry)

    jw = {k: jax.numpy.asarray(v) for k, v in weights.items()}
    gj = jax.grad(lambda a: f(jax_ops(), a, jw))({k: jax.numpy.asarray(v) for k, v in arrays.items()})
    ta = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    loss = f(torch_ops(), ta, {k: torch.tensor(v) for k, v in weights.items()})
    gt = torch.autograd.grad(loss, [ta[k] for k in names], allow_unused=True)
    gap = 0.0
    for k, g in zip(names, gt):
        a = np.asarray(gj[k])
        b = np.zeros_like(a) if g is None else g.numpy()
        scale = max(float(np.max(np.abs(a))), 1e-300)
        gap = max(gap, float(np.max(np.abs(a - b))) / scale if np.any(a) else float(np.max(np.abs(b))))
    return gap


ANSWERS = ("ok", "cannot_decide", "unavailable")


def summarize(paths: list[str]) -> None:
    """Per file and dtype: rows, statuses, the alarms (statuses that say a driver is wrong), and the
    recurrences whose two engines differ by more than 1e-10 relative on some input (an input whose
    gradients are all tiny shows its roundoff there; the engines' gap is stored per row)."""
    from collections import Counter

    for path in paths:
        rows = [json.loads(line) for line in open(path)]
        for dtype in sorted({r["dtype"] for r in rows}, reverse=True):
            mine = [r for r in rows if r["dtype"] == dtype]
            alarms = [r for r in mine if r["status"] not in ANSWERS and not r["status"].startswith("known_issue:")]
            statuses = Counter(r["status"] for r in mine)
            by_kind = Counter((r["template"] + (" +unused" if r["unused"] else ""), r["status"]) for r in alarms)
            unsettled = sorted({r["index"] for r in mine if not r["engines_agree"]})
            print(f"{path} {dtype}: {len(mine)} rows, {dict(statuses)}; alarms {len(alarms)}"
                  + (f": {dict(by_kind)}" if alarms else "")
                  + (f"; recurrences whose engines differ by > 1e-10 on some input: {unsettled}" if unsettled else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summarize", nargs="+", metavar="JSONL", help="print the counts of finished runs and exit")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--drivers", default="torch_loop,torch_scan,jax_loop,jax_lax_scan")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.summarize:
        return summarize(args.summarize)
    if not args.out:
        ap.error("--out is required")
    with open(args.out, "w") as out:
        for i in range(args.count):
            r = draw(i)
            weights = loss_weights(r)
            gap = engine_gap(r, weights)
            for dtype in args.dtypes.split(","):
                report = rnnbench.check_recurrence(
                    r["step"], r["params"], r["carry0"], xs=r["xs"], loss=loss_of, consts=weights, carry0_requires_grad=r["carry0_requires_grad"],
                    xs_requires_grad=r["xs_requires_grad"], dtype=dtype, drivers=args.drivers.split(","))
                for res in report.results:
                    out.write(json.dumps(dict(index=i, template=r["name"], dtype=dtype, driver=res.driver,
                                              status=res.status, engines_agree=gap < 1e-10, engine_gap=gap,
                                              unused="unused" in r["params"], T=len(r["xs"]),
                                              min_param=float(min(np.min(np.abs(v)) for v in r["params"].values())),
                                              report=res.report if res.status not in ("ok", "unavailable") else "")) + "\n")
            out.flush()
            print(f"\r{i + 1}/{args.count}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


if __name__ == "__main__":
    main()
