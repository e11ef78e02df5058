"""A row's speed by road (rnnbench.modes.ROADS): its own mode's timed program, and with `--roads` the
other roads to the same derivatives (rnnbench.modes.BESIDE) timed beside it, interleaved in one loop.

A road is timed only once its values agree with what the row's verdict checked (module `check_road`):
a JVP along the seeded tangent with the checked gradient's dot product with that tangent, a loop
over the examples and the batched-loss trick with the checked per-example gradients, vjp's gradient
with a jvp or func row's checked gradient (beside a per_example row vjp is the same driver's vjp
program, which that driver's own vjp row checks). One that disagrees, or that the driver does not
offer, is recorded with its reason and not timed; a road is never left out silently.

A row's record keeps its own road's timing where a vjp row keeps its forward+backward (`fwd_bwd`:
the timed derivative call, whatever its road) and names the road (`road`); each road beside it is
`roads[name]`: {"fwd_bwd": Timing, "max_rel_error", "checked"} or {"status", "reason"}."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rnnbench.check.verdicts.judge import Check
from rnnbench.drivers.base import Prepared, seeded_tangent
from rnnbench.modes import BESIDE, JVP, JVP_DUAL, PER_EXAMPLE, ROADS, VJP

NOT_OFFERED = "unavailable"  # a road's status where the driver offers no such program
DIFFERS = "differs"  # where its values disagree with the row's checked ones


def own_program(prepared: Prepared, mode: str, chk: Check) -> tuple[Callable[[], Any] | None, dict[str, Any]]:
    """(the timed program of a row of `mode`, None where it has none that agrees; its record as
    `checked_program` gives it): vjp's forward_backward, else the mode's road. A road that is the very
    call the row's verdict judged (func, per_example) needs no second check; jvp's road (one JVP along
    the seeded tangent) is another program than its check's columns and is held to them first."""
    if mode == VJP:
        return prepared.forward_backward, {}
    return checked_program(prepared, mode, chk, mode=mode)


def beside(prepared: Prepared, mode: str, chk: Check) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    """(the roads timed beside a row of `mode`, by name: the programs that agree; every road of
    BESIDE[mode] as the record keeps it before timing: the checked ones' error, the others' status
    and reason)."""
    timed: dict[str, Callable[[], Any]] = {}
    record: dict[str, Any] = {}
    for name in BESIDE.get(mode, ()):
        program, record[name] = checked_program(prepared, name, chk, mode=mode)
        if program is not None:
            timed[name] = program
    return timed, record


def checked_program(
    prepared: Prepared, name: str, chk: Check, *, mode: str
) -> tuple[Callable[[], Any] | None, dict[str, Any]]:
    """(road `name`'s program where it agrees with the checked values of a row of `mode`, else None;
    what the record keeps of it: {"max_rel_error", "checked"}, or {"status", "reason"})."""
    if name == VJP:
        program, values = prepared.forward_backward, (lambda: prepared.loss_and_grads()[1])
    elif name in prepared.roads:
        road = prepared.roads[name]
        program, values = road.run, (lambda: road.read(_blocked(prepared, road.run)))
    else:
        return None, {"status": NOT_OFFERED, "reason": f"{name}: not offered by this driver ({ROADS[name].summary})"}
    if name == mode and ROADS[name].checked_by == mode and name != JVP:
        return program, {}  # the program the row's verdict judged
    try:
        error, checked = check_road(name, values, chk, mode=mode)
    except Exception as exc:  # a road that raises is a result, as a row's driver failure is
        first = (str(exc).splitlines() or [""])[0][:300]
        return None, {"status": NOT_OFFERED, "reason": f"{name} raised {type(exc).__name__}: {first}"}
    tol = chk.tolerance.max_rel_error
    if error is not None and not error <= tol:
        return None, {"status": DIFFERS, "reason": f"rel error {error:.3g} > tolerance {tol:g} ({checked})"}
    return program, {"max_rel_error": error, "checked": checked}


def _blocked(prepared: Prepared, run: Callable[[], Any]) -> Any:
    out = run()
    prepared.block(out)
    return out


def check_road(
    name: str, values: Callable[[], Mapping[str, np.ndarray]], chk: Check, *, mode: str
) -> tuple[float | None, str]:
    """(the road's relative error against the row's checked values, None where this row holds nothing
    to check it against; what it was checked against)."""
    if name == VJP and mode == PER_EXAMPLE:
        return None, "the same driver's vjp row"
    got = values()
    want = {n: np.asarray(g, dtype=np.float64) for n, g in chk.grads.items() if g is not None}
    if name in (JVP, JVP_DUAL):
        tangent = seeded_tangent({n: g.shape for n, g in want.items()})
        exact = sum(float(np.sum(g * tangent[n])) for n, g in want.items())
        scale = sum(float(np.sum(np.abs(g * tangent[n]))) for n, g in want.items())
        return abs(float(np.ravel(got["jvp"])[0]) - exact) / max(scale, np.finfo(float).tiny), ROADS[name].checked
    worst = 0.0
    for n, g in want.items():
        mine = np.asarray(got[n], dtype=np.float64).reshape(g.shape)
        worst = max(
            worst, float(np.max(np.abs(mine - g), initial=0.0)) / max(float(np.max(np.abs(g), initial=0.0)), 1e-300)
        )
    return worst, ROADS[name].checked
