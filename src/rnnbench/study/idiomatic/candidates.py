"""The candidates timed: the rnnbench mechanisms (registry drivers), the vendor layers, and every
variant of each idiomatic baseline family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rnnbench import registry
from rnnbench.drivers import _jax, _torch
from rnnbench.drivers.base import Framework, Prepared
from rnnbench.model import Case, Model
from rnnbench.study.idiomatic.baselines import jax_jit_loop, jax_lax_scan, torch_hand_scan, torch_unbind_loop
from rnnbench.study.idiomatic.plan import DEVICE, DTYPE, Plan

# The rnnbench mechanisms compared (the main environment's loop and scan drivers).
MECHANISMS = (
    "torch_loop",
    "torch_loop_compiled",
    "torch_scan",
    "torch_scan_compiled",
    "jax_loop",
    "jax_lax_scan",
    "flax_scan",
)
# Candidates whose program is the T steps unrolled: their first call grows with T.
UNROLLED = ("torch_loop_compiled", "jax_loop", "unbind_loop_compiled")
# Each mechanism's own idiomatic form: the baseline family written with the same mechanism, so a
# ratio against it is the driver's cost, and its ratio to the best family is the mechanism's.
SAME_MECHANISM = {
    "torch_loop": "unbind loop",
    "torch_loop_compiled": "unbind loop compiled",
    "torch_scan": "scan, hand-written",
    "torch_scan_compiled": "scan, hand-written, compiled",
    "jax_loop": "jit loop",
    "jax_lax_scan": "lax.scan",
    "flax_scan": "flax nn.RNN cell",
}


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


def _driver_candidate(name: str, family: str = "") -> Candidate:
    driver = registry.get_driver(name)
    kinds = tuple(k for k in ("lstm", "elman_tanh") if driver.supports(_Kind(k)) is None)
    return Candidate(
        name,
        family,
        driver.framework,
        lambda model, case: driver.prepare(model, case, DTYPE, DEVICE),
        kinds,
        driver=name,
        unrolled=name in UNROLLED,
    )


@dataclass(frozen=True)
class _Kind:
    """Just enough of a Model for Driver.supports (which reads .kind and .name)."""

    kind: str
    name: str = ""


def candidates(plan: Plan) -> list[Candidate]:
    out = [_driver_candidate(name) for name in MECHANISMS]
    out += [_driver_candidate(name, "torch.nn") for name in ("torch_nn_lstm", "torch_nn_rnn")]
    out += [_driver_candidate(name, "flax nn.RNN cell") for name in ("flax_lstm_cell", "flax_simple_cell")]
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
