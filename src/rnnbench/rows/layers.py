"""Where a compiled driver's wrong gradient appears: the pair checked at each of its framework's
layers (Framework.layers: torch.compile's backends eager, aot_eager and inductor; jax without and
with jit), least transformed first, each verdict by rnnbench.rows.pair.check_pair against one
oracle. The first layer that fails where every layer before it was ok is the one that breaks the
gradient (`rnnbench bisect --layers`):

    grad_mismatch appears at inductor (eager ok, aot_eager ok)

A pair that fails at the first layer already fails before any compiler pass a layer adds (the
step, the framework's autograd, dynamo's capture).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rnnbench.check.oracles.oracle import oracle_grads
from rnnbench.drivers.base import Driver
from rnnbench.errors import InputError
from rnnbench.model import Case, Model
from rnnbench.rows.pair import PairPlan, check_pair
from rnnbench.status import is_failing, is_known


@dataclass(frozen=True)
class LayerCheck:
    """One layer's verdict and its evidence: the largest relative error of any gradient (None where
    the driver raised before giving one), the tolerance it was judged at, the settings the driver
    recorded (the backend it compiled with), and the check's report."""

    layer: str
    status: str
    max_rel_error: float | None
    tolerance: float | None
    settings: dict[str, Any] = field(default_factory=dict)
    report: str = ""

    @property
    def wrong(self) -> bool:
        """A failing verdict or a registered bug that reproduces: the gradient is not right here."""
        return is_failing(self.status) or is_known(self.status)

    def evidence(self) -> str:
        error = "no gradients" if self.max_rel_error is None else f"max rel error {self.max_rel_error:.3g}"
        bar = "" if self.tolerance is None else f" (tolerance {self.tolerance:.3g})"
        return f"{self.layer}: {self.status}, {error}{bar}"


@dataclass(frozen=True)
class Attribution:
    """A pair's verdict at each layer, in Framework.layers' order."""

    row: str
    layers: tuple[LayerCheck, ...]

    @property
    def culprit(self) -> LayerCheck | None:
        """The first layer whose gradient is wrong, or None where every layer's is right."""
        return next((c for c in self.layers if c.wrong), None)

    def line(self) -> str:
        """The one-line finding (module docstring)."""
        culprit = self.culprit
        others = ", ".join(f"{c.layer} {c.status}" for c in self.layers if c is not culprit)
        if culprit is None:
            return f"{self.row}: ok at every layer ({others})"
        if culprit is self.layers[0]:
            return f"{self.row}: {culprit.status} already at {culprit.layer}, the first layer ({others})"
        return f"{self.row}: {culprit.status} appears at {culprit.layer} ({others})"

    def to_dict(self) -> dict[str, Any]:
        culprit = self.culprit
        return {
            "row": self.row,
            "line": self.line(),
            "appears_at": None if culprit is None else culprit.layer,
            "layers": [
                {
                    "layer": c.layer,
                    "status": c.status,
                    "max_rel_error": c.max_rel_error,
                    "tolerance": c.tolerance,
                    "settings": c.settings,
                }
                for c in self.layers
            ],
        }


def attribute(model: Model, driver: Driver, case: Case, *, dtype: str, device: str = "cpu") -> Attribution:
    """The pair (its availability established by the caller; `case` rounded to `dtype`) checked at
    each of its framework's layers. InputError for a driver that does not compile or whose
    framework has no layers."""
    layers = driver.framework.layers
    if not driver.compiled or not layers:
        raise InputError(
            f"{driver.name} does not compile through layers ({driver.framework.name}): nothing to attribute"
        )
    oracle = oracle_grads(model, case)  # one oracle: every layer is judged against the same reference
    plan = PairPlan(oracle=oracle, repeat=False, localize=False)
    checks = []
    for layer in layers:
        with driver.framework.at_layer(layer):
            pair = check_pair(model, driver, case, dtype=dtype, device=device, plan=plan)
        chk = pair.check
        checks.append(
            LayerCheck(
                layer,
                status=str(pair.status),
                max_rel_error=chk.max_rel_error if chk.errors else None,
                tolerance=chk.tolerance.max_rel_error,
                settings=dict(pair.prepared.settings) if pair.prepared is not None else {},
                report=pair.report,
            )
        )
    return Attribution(f"{model.name}/{driver.name}/{dtype}", tuple(checks))
