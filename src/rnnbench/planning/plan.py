"""What a run selects and in which rows: the name selections (models, drivers, environments,
dtypes, sizes), the job matrix of a run's settings (rnnbench.planning.settings), its shards, what a
resumed run still has to do, and the drivers a fuzz campaign runs on, from the suites of
rnnbench.suites. Planning lives here, not in the command line, so that the API and the executors
plan rows without importing the CLI.

Every function raises rnnbench.errors.InputError on bad input (one line, exit code 2 at the CLI)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rnnbench import registry, results_file
from rnnbench.drivers.base import Framework
from rnnbench.errors import InputError, unknown
from rnnbench.machine import environments
from rnnbench.model import Model
from rnnbench.modes import HVP, MODES, VJP
from rnnbench.planning import gpu_suite
from rnnbench.planning.settings import RunSettings
from rnnbench.rows.pair import unavailable_reason
from rnnbench.rows.row import Job
from rnnbench.rows.timing import TimingConfig
from rnnbench.suites import SUITES

DEVICES = ("cpu", "cuda")


# Where the names of a long selection axis are listed (an unknown name's message points there).
LISTED_BY = {"model": "`rnnbench list`", "driver": "`rnnbench list`", "environment": "`rnnbench env list`"}


def names(value: str | None, known: Sequence[str], what: str, required: bool = False) -> list[str]:
    """The names in a comma-separated selection, each once, in the order given; None selects all
    (unless `required`). A selection that names nothing (",") is an error, not an empty run."""
    if value is None and not required:
        return list(known)
    chosen = list(dict.fromkeys(v.strip() for v in (value or "").split(",") if v.strip()))
    if not chosen:
        raise InputError(f"the {what} selection {value!r} names nothing; known: {', '.join(known)}")
    for n in chosen:
        if n not in known:
            raise InputError(unknown(what, n, known, LISTED_BY.get(what, "")))
    return chosen


def positive_int(text: str, what: str) -> int:
    """`text` as a positive integer, else InputError after `what` (e.g. "size T=", "--lengths value ")."""
    try:
        n = int(text)
    except ValueError:
        raise InputError(f"{what}{text!r} is not an integer") from None
    if n <= 0:
        raise InputError(f"{what}{n} must be positive")
    return n


def parse_sizes(value: str | None) -> dict[str, int]:
    """`KEY=VALUE,...` overrides of model sizes, each a positive integer."""
    out: dict[str, int] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        key, sep, num = item.partition("=")
        if not sep:
            raise InputError(f"size {item!r} is not KEY=VALUE (e.g. --sizes T=64,H=128)")
        out[key.strip()] = positive_int(num, f"size {key.strip()}=")
    return out


def used_sizes(sizes: dict[str, int], models: list[str]) -> dict[str, int]:
    """`sizes`, each used by a selected model."""
    for key in sizes:
        if not any(key in registry.get_model(m).default_sizes for m in models):
            raise InputError(f"size {key!r} is not used by any selected model")
    return sizes


def suite_names(selection: Any, items: dict[str, Any]) -> list[str]:
    """The names a suite selects on one axis (rnnbench.suites) among registry `items` (models or drivers)."""
    if isinstance(selection, tuple):
        return list(selection)
    return [name for name, item in items.items() if selection in ("all", item.suite)]


def modes_planned(selected: tuple[str, ...], order_flag: str) -> tuple[list[str], str]:
    """(the first-order modes that get rows, the --order their vjp rows check H v by) for the
    selected differentiation modes (rnnbench.modes). H v lives in the vjp row: hvp alone plans the
    vjp rows with H v on; without hvp, --order auto checks first order only (an explicit --order wins)."""
    rows = [m for m in selected if MODES[m].order == 1]
    if HVP in selected and VJP not in rows:
        rows.insert(0, VJP)
    if order_flag != "auto":
        return rows, order_flag
    if HVP not in selected:
        return rows, "1"
    return rows, "auto" if VJP in selected else "2"  # hvp asked for alone: on every vjp row that has one


def order(value: str, model: Model, dtype: str) -> int:
    """auto: the H v check joins float64 rows of core models (measured cost: docs/checking.md)."""
    if value == "auto":
        return 2 if dtype == "float64" and model.suite == "core" else 1
    return int(value)


def install_hint(framework: Framework) -> str:
    """How to install a framework: the package extra named after its family (`rnnbench[torch]`,
    `rnnbench[jax]`: pyproject.toml), and in a source checkout the make target too; a plugin's own
    framework by its package. Never a path: an installed rnnbench lives in site-packages."""
    if framework.name not in registry.builtin_frameworks():  # a plugin's framework: no extra of ours has it
        return "pip"
    pip = f"`pip install 'rnnbench[{framework.family}]'`"
    checkout = (Path(__file__).resolve().parents[3] / "Makefile").is_file()
    return pip + (" (in this checkout: `make venv`)" if checkout else "")


def frameworks_hint() -> str:
    """How to install any of rnnbench's frameworks (where none is installed): every extra, once."""
    hints = sorted({install_hint(f) for f in registry.frameworks().values() if f.name in registry.builtin_frameworks()})
    checkout = " (in this checkout: `make venv`)"
    either = " or ".join(h.removesuffix(checkout) for h in hints)
    return either + (checkout if any(checkout in h for h in hints) else "")


def check_drivers_runnable(named: Sequence[str], envs: Sequence[str] = ("main",)) -> None:
    """A driver named explicitly that would run in this interpreter (the main environment, when
    selected) while its framework is missing here is bad input, whatever other environments it
    runs in: one line naming the extra to install. A missing *other* environment is not: its rows
    say how to create it."""
    for name in named:
        d = registry.get_driver(name)
        if "main" in d.environments and "main" in envs:
            reason = d.available()
            if reason:
                raise InputError(
                    f"driver {name!r} cannot run here: {reason}; install it with {install_hint(d.framework)}"
                )


def jobs(s: RunSettings) -> list[Job]:
    """The rows of a run with settings `s` (checked where they were given: rnnbench.cli.options):
    every dtype x model x loss form x driver x environment the driver runs in, in that order; with
    s.shard, that shard's only."""
    suite = SUITES[s.suite]
    models = list(s.models or suite_names(suite.models, registry.models()))
    drivers = list(s.drivers or suite_names(suite.drivers, registry.drivers()))
    # Named drivers run in each of their default environments (naming torch_xla_loop means running
    # it); the suite's environments hold for the suite's own drivers.
    suite_envs = "default" if s.drivers else suite.environments
    envs = list(s.environments or (environments.default_names() if suite_envs == "default" else suite_envs))
    size_sets = [used_sizes(s.sizes or {}, models)] if s.sizes is not None or not suite.sizes else list(suite.sizes)
    check_drivers_runnable(s.drivers or (), envs)
    timing = TimingConfig(budget_s=s.budget)
    row_modes, hvp_order = modes_planned(s.modes, s.order)
    pairs = [(d, env) for d in drivers for env in envs if environments.runs(registry.get_driver(d), env)]
    if not pairs:  # a run of nothing would exit 0 with an empty results file
        raise InputError(
            f"no selected driver runs in the selected environments ({', '.join(envs)}): "
            + "; ".join(f"{d} runs in {', '.join(registry.get_driver(d).environments)}" for d in drivers[:5])
            + ("; ..." if len(drivers) > 5 else "")
        )
    planned = [
        Job(
            model=m,
            driver=d,
            dtype=dtype,
            device=s.device,
            sizes=dict(overrides),
            seed=s.seed,
            threads=s.threads,
            timing=timing,
            time=s.timed,
            environment=env,
            loss_form=loss_form,
            order=order(hvp_order, registry.get_model(m), dtype) if mode == VJP else 1,
            compile_budget_s=s.compile_budget,
            profile=s.profile,
            mode=mode,
            roads=s.roads,
        )
        for dtype in s.dtypes
        for m in models
        for overrides in size_sets
        for loss_form in s.losses
        for d, env in pairs
        for mode in row_modes
    ]
    if suite.staged:  # its own order, on a device it checks
        gpu_suite.check_jobs(s.device, planned)
        planned = gpu_suite.order(planned)
    return shard(planned, *s.shard) if s.shard else planned


def stages(s: RunSettings, planned: list[Job]) -> list[list[Job]]:
    """The groups a run of `s` runs one after the other (gpu: cheap sizes first); one group otherwise."""
    return gpu_suite.stages(planned) if SUITES[s.suite].staged else [planned]


def shard(planned: list[Job], i: int, n: int) -> list[Job]:
    """Shard i of n (1 <= i <= n) of `planned`: deterministic, the shards partition the rows."""
    return [j for k, j in enumerate(sorted(planned, key=Job.key)) if k % n == i - 1]


def not_yet_recorded(planned: list[Job], out: Path, results: results_file.ResultsFile) -> tuple[int, list[Job]]:
    """A resumed run: how many of `planned` `out` already records (skipped), and the rest, to run
    (results_file.resume_plan reruns or refuses records of another version or settings)."""
    wanted = [
        (j.key(), j.fingerprint(), j.settings(), f"{j.model}/{j.driver}/{j.environment}/{j.dtype}") for j in planned
    ]
    todo = results_file.resume_plan(out, results.existing, wanted)
    return len(planned) - len(todo), [planned[i] for i in todo]


def unavailable_here(jobs: list[Job]) -> int:
    """How many of `jobs` are unavailable as decided before any worker starts (the runner decides
    them first, with the same rnnbench.rows.pair.unavailable_reason): the progress log says so first."""
    return sum(
        unavailable_reason(registry.get_model(j.model), registry.get_driver(j.driver), **j.where()) is not None
        for j in jobs
    )


def fuzz_drivers(value: str | None, dtype: str, device: str, probe: Model) -> list:
    """Named drivers (each must run here and support a user step at `dtype` on `device`), or the
    default set: every available eager / jax driver of this environment that runs an arbitrary step.
    probe: a fuzzed body's model (rnnbench.fuzz builds it), asked of each driver."""
    here = [d for d in registry.drivers().values() if environments.runs(d, environments.current())]
    if value:
        chosen = [registry.get_driver(n) for n in names(value, [d.name for d in here], "driver")]
    else:
        chosen = [d for d in here if not d.slow_to_compile]
    why = {d.name: unavailable_reason(probe, d, dtype=dtype, device=device) for d in chosen}
    for d in chosen:
        if why[d.name] and value:
            raise InputError(f"driver {d.name!r} cannot fuzz here: {why[d.name]}")
    return [d for d in chosen if why[d.name] is None]
