"""Compare a driver's loss and gradients with the oracle: one verdict per compared input."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping, Optional

import numpy as np

from rnnbench.check.tolerance import Tolerance
from rnnbench.status import InputStatus, Status


@dataclass(frozen=True)
class InputError:
    """How one gradient compares. index is the entry with the largest error; got/want its values."""

    name: str
    status: str  # an InputStatus
    max_rel_error: float
    index: tuple[int, ...]
    got: float
    want: float
    scale: float
    detail: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["index"] = list(self.index)
        return d


def compare_grads(
    got: Mapping[str, Optional[np.ndarray]],
    want: Mapping[str, np.ndarray],
    names: list[str],
    tol: Tolerance,
    per_name: Optional[Mapping[str, Tolerance]] = None,
) -> list[InputError]:
    """Per input in `names`: normwise relative error (see tolerance.py) and whether it is missing
    (None, or identically zero where the oracle is not: the docs/bugs.md §5 class). per_name overrides
    `tol` for some inputs (fp32 islands under autocast, tolerance.island_tolerance)."""
    G = max((float(np.max(np.abs(want[n]))) if np.size(want[n]) else 0.0) for n in names) if names else 0.0
    out = []
    base_tol = tol
    for name in names:
        tol = (per_name or {}).get(name, base_tol)
        r = np.asarray(want[name], dtype=np.float64)
        r_max = float(np.max(np.abs(r))) if r.size else 0.0
        scale = max(r_max, tol.scale_floor * G, tol.absolute_scale) or 1.0
        g = got.get(name)
        if g is None:
            out.append(InputError(name, InputStatus.MISSING, float("inf"), (), float("nan"), 0.0, scale, "gradient is None"))
            continue
        g = np.asarray(g, dtype=np.float64)
        if g.shape != r.shape:
            out.append(
                InputError(name, InputStatus.MISMATCH, float("inf"), (), float("nan"), 0.0, scale,
                           f"shape {g.shape} != oracle shape {r.shape}")
            )
            continue
        if r.size == 0:
            out.append(InputError(name, InputStatus.OK, 0.0, (), 0.0, 0.0, scale))
            continue
        diff = np.abs(g - r)
        diff = np.where(np.isnan(diff), np.inf, diff)
        flat = int(np.argmax(diff))
        idx = tuple(int(i) for i in np.unravel_index(flat, r.shape))
        err = float(diff.flat[flat] / scale)
        if not np.any(g) and r_max > tol.max_rel_error * scale:
            status, detail = InputStatus.MISSING, "gradient is identically zero"
        elif err <= tol.max_rel_error:
            status, detail = InputStatus.OK, ""
        else:
            status, detail = InputStatus.MISMATCH, ""
        out.append(InputError(name, status, err, idx, float(g.flat[flat]), float(r.flat[flat]), scale, detail))
    return out


def loss_rel_error(got: float, want: float) -> float:
    """|got - want| / max(|want|, 1): losses here are sums of O(1) terms, so 1 is their scale."""
    if not np.isfinite(got):
        return float("inf")
    return abs(got - want) / max(abs(want), 1.0)


def verdict(loss_error: float, errors: list[InputError], tol: Tolerance) -> str:
    """Row status from the staged check: forward first, then presence, then agreement."""
    if loss_error > tol.max_rel_error:
        return Status.FORWARD_MISMATCH
    if any(e.status == InputStatus.MISSING for e in errors):
        return Status.MISSING_GRAD
    if any(e.status == InputStatus.MISMATCH for e in errors):
        return Status.GRAD_MISMATCH
    return Status.OK


def describe(errors: list[InputError], loss_error: float, tol: Tolerance) -> str:
    """Readable multi-line report of what differed."""
    lines = [f"loss rel error {loss_error:.3g} (tolerance {tol.max_rel_error:g}, {tol.dtype}, {tol.oracle} oracle)"]
    for e in errors:
        mark = "  " if e.status == InputStatus.OK else "!!"
        where = f"at {list(e.index)}: got {e.got:.10g}, want {e.want:.10g}" if e.index else ""
        lines.append(f"{mark} {e.name:<10} {e.status:<8} rel err {e.max_rel_error:.3g} {where} {e.detail}".rstrip())
    return "\n".join(lines)
