"""The candidates timed: the rnnbench mechanisms (registry drivers), the vendor layers, and every
variant of each idiomatic baseline family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rnnbench import registry
from rnnbench.drivers.base import Driver, Framework, Prepared
from rnnbench.drivers.jax import _framework as _jax
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.model import Case, Model
from rnnbench.study.idiomatic.baselines import jax_jit_loop, jax_lax_scan, torch_hand_scan, torch_unbind_loop
from rnnbench.study.idiomatic.plan import DEVICE, DTYPE, MODELS, Plan
from rnnbench.suites import MECHANISMS, VENDOR_LAYERS

# Each mechanism's own idiomatic form (rnnbench.suites.Mechanism.idiom): the baseline family
# written with the same construct.
SAME_MECHANISM = {m.driver: m.idiom for m in MECHANISMS}


@dataclass(frozen=True)
class Candidate:
    """One thing timed: an rnnbench mechanism (a registry driver) or a variant of a baseline family.
    family: the baseline family, "" for a mechanism. prepare(model, case) -> Prepared."""

    name: str
    family: str
    framework: Framework
    prepare: Callable[[Model, Case], Prepared]
    kinds: tuple[str, ...] = ("lstm", "elman_tanh")
    driver: str = ""  # the registry driver it is, if any
    unrolled: bool = False

    @property
    def mechanism(self) -> bool:
        return not self.family

    def as_driver(self) -> Driver:
        """The candidate as rnnbench.rows.pair.check_pair checks it: its prepare at the study's dtype
        and device, under the name the known-issues registry knows it by (its driver's, if any). Not
        `compiled`: the study's records call a failed first call error, compiling or not."""
        return Driver(
            name=self.driver or self.name,
            framework=self.framework,
            summary=self.family or "mechanism",
            prepare=lambda model, case, dtype, device: self.prepare(model, case),
            dtypes=(DTYPE,),
            devices=(DEVICE,),
        )


def _driver_candidate(name: str, family: str = "", unrolled: bool = False) -> Candidate:
    driver = registry.get_driver(name)
    kinds = tuple(k for k in ("lstm", "elman_tanh") if driver.supports(_Kind(k)) is None)
    return Candidate(
        name,
        family=family,
        framework=driver.framework,
        prepare=lambda model, case: driver.prepare(model, case, DTYPE, DEVICE),
        kinds=kinds,
        driver=name,
        unrolled=unrolled,
    )


@dataclass(frozen=True)
class _Kind:
    """Just enough of a Model for Driver.supports (which reads .kind, .name and .integer_inputs)."""

    kind: str
    name: str = ""
    integer_inputs: tuple[str, ...] = ()  # the study's models have no integer leaves


def candidates(plan: Plan) -> list[Candidate]:
    out = [_driver_candidate(m.driver, unrolled=m.unrolled) for m in MECHANISMS]
    out += [_driver_candidate(vendor.drivers[model], vendor.family) for vendor in VENDOR_LAYERS for model in MODELS]
    for hoisted, where in ((True, "hoisted"), (False, "in cell")):
        out.append(
            Candidate(
                f"unbind_loop[{where}]",
                "unbind loop",
                _torch.TORCH,
                lambda m, c, h=hoisted: torch_unbind_loop(m, c, h, compiled=False),
            )
        )
    out.append(
        Candidate(
            "unbind_loop_compiled[hoisted]",
            "unbind loop compiled",
            _torch.TORCH,
            lambda m, c: torch_unbind_loop(m, c, True, compiled=True),
            unrolled=True,
        )
    )
    out.append(
        Candidate("hand_scan", "scan, hand-written", _torch.TORCH, lambda m, c: torch_hand_scan(m, c, compiled=False))
    )
    out.append(
        Candidate(
            "hand_scan_compiled",
            "scan, hand-written, compiled",
            _torch.TORCH,
            lambda m, c: torch_hand_scan(m, c, compiled=True),
        )
    )
    for indexed, how in ((False, "unstack"), (True, "xp[t]")):
        out.append(
            Candidate(
                f"jit_loop[{how}]", "jit loop", _jax.JAX, lambda m, c, i=indexed: jax_jit_loop(m, c, i), unrolled=True
            )
        )
    for unroll in plan.unrolls:
        for hoisted, where in ((True, "hoisted"), (False, "in cell")):
            out.append(
                Candidate(
                    f"lax_scan[unroll={unroll}, {where}]",
                    "lax.scan",
                    _jax.JAX,
                    lambda m, c, h=hoisted, u=unroll: jax_lax_scan(m, c, h, u),
                )
            )
    return out
