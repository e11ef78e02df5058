"""The settings of `rnnbench run` as one typed value: built once at the command line's edge
(rnnbench.cli.options.settings: defaults, then the suite's, then a --config file, then the flags),
checked there, and handed as it is to the planner (rnnbench.planning.plan.jobs), its stages and shards."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

CORES = len(os.sched_getaffinity(0))  # the cores this process may run on


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What a run selects and how each row runs. Selections are names checked against the registry,
    each once, in the order given; None leaves the axis to the suite. Every field but `timed` and
    `shard` is also a key of a --config file (CONFIG_KEYS, in this order)."""

    suite: str = "quick"  # what models / drivers / environments default to (rnnbench.suites.SUITES)
    models: tuple[str, ...] | None = None  # None: the suite's
    drivers: tuple[str, ...] | None = None  # None: the suite's; named drivers run in each default environment
    environments: tuple[str, ...] | None = None  # None: the suite's; a driver runs once in each of its own
    dtypes: tuple[str, ...] = ("float32",)
    device: str = "cpu"
    sizes: dict[str, int] | None = None  # overrides of each model's sizes; None: its defaults (or the suite's sets)
    seed: int = 0
    # One core per row: a row's pools never wait on each other or on the run's own parent, its
    # CPU time is its time (the clock that decides on a busy machine), and it leaves the other
    # cores to whatever else runs (docs/measuring.md#busy-machines-which-clock-decides).
    threads: int = 1
    budget: float = 0.5  # seconds of repeats per timed quantity
    timeout: float = 600.0  # seconds before a row is killed
    memory_limit_gb: float | None = None  # address-space limit per worker; None: no limit
    losses: tuple[str, ...] = ("model",)  # loss forms (rnnbench.losses); "model": each model's own loss
    order: str = "auto"  # "1", "2", or "auto": 2 on float64 rows of core models (H v checked too)
    # differentiation modes (rnnbench.modes): a row per first-order mode; hvp: H v in the vjp rows (per order)
    modes: tuple[str, ...] = ("vjp", "hvp")
    compile_budget: float | None = None  # seconds a row's first call may take; None: only the timeout
    timed: bool = True  # False (--no-time): check gradients only
    shard: tuple[int, int] | None = None  # (i, n): only shard i of n of the rows (--shard i/n)
    roads: bool = False  # --roads: each timed row also times the other roads to its derivatives (rows.roads)
    profile: bool = False  # --profile: each timed row's profile, after its timing (rnnbench.rows.profile)


CONFIG_KEYS = tuple(
    f.name for f in dataclasses.fields(RunSettings) if f.name not in ("timed", "shard", "profile", "roads")
)
