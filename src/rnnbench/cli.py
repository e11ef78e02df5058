"""Command line: `rnnbench run` (the default comparison), `rnnbench list`, `rnnbench table`,
`rnnbench sweep` (sizes, cold rows, time budgets), `rnnbench report` (charts + HTML from records),
`rnnbench fuzz` (random step bodies on every driver: first and second order vs finite differences).

Exit codes: 0 every row ok, unavailable or a registered known issue (known_issue:<id>); 1 some row
failed its check or crashed, or a registered known issue no longer reproduces
(known_issue_fixed:<id>), the disk refused a write, or an internal error (one line, the traceback
saved to a file); 2 bad input (one line on stderr, no traceback, nothing written); 128+N cut short
by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP); 141 stdout's reader went away. See main()."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from rnnbench import losses, record, registry
from rnnbench.errors import InputError
from rnnbench.check.tolerance import tolerance
from rnnbench.report.table import failure_reports, format_table, summary
from rnnbench.run import environments, executors, isolation
from rnnbench.run.row import Job
from rnnbench.run.timing import TimingConfig
from rnnbench.status import is_failing

DTYPES = ("float32", "float64", "bfloat16")
DEVICES = ("cpu", "cuda")

# Defaults of `run`, also the keys a --config file may set.
RUN_DEFAULTS: dict[str, Any] = {
    "suite": "quick",  # what --models / --drivers / --environments default to (SUITES)
    "models": None,  # the suite's
    "drivers": None,  # the suite's
    "environments": None,  # the suite's: a driver runs once in each of its environments
    "dtypes": "float32",
    "device": "cpu",
    "sizes": None,  # each model's defaults
    "seed": 0,
    "threads": None,  # all the cores this process may run on
    "budget": 0.5,
    "timeout": 600.0,
    "memory_limit_gb": None,
    "losses": "model",  # loss forms (rnnbench.losses); "model": each model's own loss
    "order": "auto",  # 1, 2, or auto: 2 on float64 rows of core models (H v checked too)
}


# --suite: what a run selects on each axis that --models / --drivers / --environments leave open.
# Models and drivers: a tuple of names, or a Model.suite / Driver.suite value ("core", "bugs"; "all"
# for every one); environments: a tuple, or "default" (the environments.toml entries marked default),
# for the suite's drivers: drivers named with --drivers run in every default environment of theirs.
# quick, the default, is the comparison at a glance: one model per family (Elman, LSTM, a stacked
# recurrence, Taylor, Newton) on every core driver in the main environment; it costs a quarter of
# `core` and is measured to stay within cold 4 min / warm 90 s on 2 cores
# (docs/results/2026-11-25-default-run-cost.md). core: every core model, and the torch 2.9.0 /
# torch_xla environment too. bugs: the docs/bugs.md case models on every driver, buffer drivers
# included. all: both.
SUITES: dict[str, dict[str, Any]] = {
    "quick": {"models": ("rnn", "lstm", "lstm2", "taylor_exp", "newton_sqrt"), "drivers": "core",
              "environments": ("main",)},
    "core": {"models": "core", "drivers": "core", "environments": "default"},
    "bugs": {"models": "bugs", "drivers": "all", "environments": "default"},
    "all": {"models": "all", "drivers": "all", "environments": "default"},
    # realistic: sizes people train at (docs/cli.md#the-realistic-suite), one driver per mechanism
    # (no unrolled loops: their compile grows with T) and the vendor layers; "sizes" are the suite's
    # size sets, each row run at each (--sizes replaces them).
    "realistic": {"models": ("rnn", "lstm", "lstm2"), "environments": ("main",),
                  "drivers": ("torch_loop", "torch_scan_compiled", "jax_lax_scan", "flax_scan", "torch_nn_rnn",
                              "torch_nn_lstm", "flax_simple_cell", "flax_lstm_cell"),
                  "sizes": tuple({"T": t, "B": 32, "I": h, "H": h} for t in (128, 512) for h in (256, 512))},
}


UsageError = InputError  # bad input: one line, exit code 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + exits 2; we want one line
        raise UsageError(message)


def _names(value: Optional[str], known: Sequence[str], what: str, required: bool = False) -> list[str]:
    """The names in a comma-separated selection, each once, in the order given; None selects all
    (unless `required`). A selection that names nothing (",") is an error, not an empty run."""
    if value is None and not required:
        return list(known)
    names = list(dict.fromkeys(v.strip() for v in (value or "").split(",") if v.strip()))
    if not names:
        raise UsageError(f"the {what} selection {value!r} names nothing; known: {', '.join(known)}")
    for n in names:
        if n not in known:
            raise UsageError(f"unknown {what} {n!r}; known: {', '.join(known)}")
    return names


CORES = len(os.sched_getaffinity(0))
MAX_SECONDS = 7 * 24 * 3600.0  # a limit beyond a week is a typo, and larger ones overflow timers


def _number(what: str, value: Any, *, integer: bool = False, maximum: Optional[float] = None,
            minimum: float = 0.0, inclusive: bool = False) -> Any:
    """`value` as a finite number above `minimum` (at or above with inclusive) and at most
    `maximum`, else UsageError naming `what` (a flag or a config key). nan and inf never pass:
    a limit that is not a number must not switch itself off."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise UsageError(f"{what} must be {kind}, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
        bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        raise UsageError(f"{what} must be a finite number {bound}, got {value!r}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{what} must be at most {maximum:g}, got {value!r}")
    return value


def _threads(what: str, value: Any) -> int:
    return _number(what, value, integer=True, maximum=CORES)


def _sizes(value: Optional[str], models: list[str]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        key, sep, num = item.partition("=")
        key = key.strip()
        if not sep:
            raise UsageError(f"size {item!r} is not KEY=VALUE (e.g. --sizes T=64,H=128)")
        try:
            n = int(num)
        except ValueError:
            raise UsageError(f"size {key}={num!r} is not an integer") from None
        if n <= 0:
            raise UsageError(f"size {key}={n} must be positive")
        if not any(key in registry.get_model(m).default_sizes for m in models):
            raise UsageError(f"size {key!r} is not used by any selected model")
        sizes[key] = n
    return sizes


def _shard(value: Optional[str]) -> Optional[tuple[int, int]]:
    if value is None:
        return None
    i, sep, n = value.partition("/")
    try:
        i_, n_ = int(i), int(n)
    except ValueError:
        raise UsageError(f"--shard {value!r} is not I/N (e.g. --shard 2/4)") from None
    if not sep or n_ <= 0 or not 1 <= i_ <= n_:
        raise UsageError(f"--shard {value!r} needs 1 <= I <= N")
    return i_, n_


SELECTIONS = ("models", "drivers", "environments", "dtypes", "losses")
NUMERIC = ("seed", "threads", "budget", "timeout", "memory_limit_gb")


def _load_config(path: Optional[str]) -> dict[str, Any]:
    """The settings of a TOML config file, each checked for its type (numbers are checked with the
    flags' in _check_limits; until then they travel as (key, value, where) to name their origin)."""
    if path is None:
        return {}
    import tomllib

    try:
        with open(path, "rb") as f:
            config = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"config file {path} is a directory, not a TOML file") from None
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None
    if isinstance(config.get("environments"), dict):  # [environments.<name>] tables: definitions, run in them
        names = environments.add_definitions(config["environments"], f"config file {path}")
        if not names:
            raise UsageError(f"config file {path}: the [environments] table defines no environment")
        config["environments"] = ",".join(names)
    unknown = sorted(set(config) - set(RUN_DEFAULTS))
    if unknown:
        raise UsageError(f"config file {path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(RUN_DEFAULTS)}")
    for key, value in config.items():
        where = f"config file {path}: key {key!r}"
        if key in SELECTIONS and isinstance(value, list) and all(isinstance(v, str) for v in value):
            config[key] = ",".join(value)  # lists are accepted as well as "a,b"
        elif key == "sizes" and isinstance(value, dict):
            for name, n in value.items():
                _number(f"{where}: size {name!r}", n, integer=True)
            config[key] = ",".join(f"{k}={v}" for k, v in value.items())
        elif key == "order" and isinstance(value, int) and not isinstance(value, bool):
            config[key] = str(value)
        elif key in NUMERIC:
            continue  # checked with the flags' values in _check_limits
        elif not isinstance(value, str):
            expected = "a string or a list of strings" if key in SELECTIONS else "a string"
            if key == "sizes":
                expected = 'a table (e.g. sizes = {T = 64}) or a string "T=64,H=128"'
            raise UsageError(f"{where} must be {expected}, got {type(value).__name__} {value!r}")
    for key in NUMERIC:
        if key in config:
            config[key] = (key, config[key], f"config file {path}: key {key!r}")
    return config


def _parser() -> _Parser:
    p = _Parser(prog="rnnbench", description=__doc__)
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="check gradients and time every model x driver (the default)")
    run.add_argument("--config", help="TOML file with any of: " + ", ".join(RUN_DEFAULTS))
    run.add_argument("--suite", help="quick (default: rnn, lstm, lstm2, taylor_exp, newton_sqrt on every core driver, "
                     "main environment), core (every core model, also in the torch 2.9.0 / torch_xla environment), "
                     "bugs (the docs/bugs.md case models: variants, loop bodies, mixed precision, on every driver) "
                     "realistic (rnn, lstm, lstm2 at T=128,512 x I=H=256,512, B=32: one driver per mechanism and the vendor "
                     "layers), or all; --models / --drivers / --environments / --sizes override it on their axis")
    run.add_argument("--models", help="comma-separated model names (default: those of --suite)")
    run.add_argument("--drivers", help="comma-separated driver names (default: those of --suite)")
    run.add_argument("--environments", help="comma-separated environments (`rnnbench env list`; default: those of "
                     "--suite, each driver once in each of its environments); a framework-version environment runs "
                     "every driver of its framework and is created on first use")
    run.add_argument("--dtypes", help=f"comma-separated, from {', '.join(DTYPES)} (default float32)")
    run.add_argument("--device", help="cpu (default) or cuda")
    run.add_argument("--sizes", help="overrides of model sizes, e.g. T=64,H=128")
    run.add_argument("--seed", type=int)
    run.add_argument("--threads", type=int, help="threads per framework, at most the cores this process may use "
                     "(default: all of them)")
    run.add_argument("--budget", type=float, help="seconds of repeats per timed quantity (default 0.5)")
    run.add_argument("--timeout", type=float, help="seconds before a row is killed (default 600)")
    run.add_argument("--memory-limit-gb", dest="memory_limit_gb", type=float, help="address-space limit per worker")
    run.add_argument("--losses", help="comma-separated loss forms, from " + ", ".join(losses.NAMES)
                     + " (default: model, each model's own loss); every row runs under each")
    run.add_argument("--order", help="1, 2 (also check Hessian-vector products, float64 rows), or auto "
                     "(default: 2 on float64 rows of core models)")
    run.add_argument("--no-time", action="store_true", help="check gradients only")
    run.add_argument("--shard", help="run only shard I of N of the row matrix, e.g. 2/4 (deterministic)")
    run.add_argument("--out", help="results file (JSON Lines; default results/run-<timestamp>.jsonl)")
    run.add_argument("--resume", action="store_true", help="skip rows already recorded in --out")
    sub.add_parser("list", help="models and drivers, with availability here")
    versions = sub.add_parser("versions", help="the bug x version table: every registered known issue and bug class "
                              "in every environment of the framework-version matrix")
    versions.add_argument("--environments", help="comma-separated (default: every environment in "
                          "src/rnnbench/environments.toml; missing ones are created)")
    versions.add_argument("--timeout", type=float, default=900.0, help="seconds before a row is killed (default 900)")
    versions.add_argument("--out", help="results file (default results/versions-<timestamp>.jsonl)")
    versions.add_argument("--resume", action="store_true", help="skip rows already recorded in --out")
    versions.add_argument("--from", dest="from_files", nargs="+", metavar="FILE",
                          help="print the table of these results files instead of running")
    env = sub.add_parser("env", help="the Python environments rows run in (src/rnnbench/environments.toml): list, create")
    env.add_argument("action", choices=("list", "create"))
    env.add_argument("names", nargs="*", help="environments to create (created once, then reused)")
    table = sub.add_parser("table", help="print the table of one or more results files (several machines merge)")
    table.add_argument("files", nargs="+")
    table.add_argument("--all", action="store_true", help="list unavailable rows in the table too")
    sweep = sub.add_parser("sweep", help="time models x drivers over sequence lengths and hidden sizes, each row cold")
    sweep.add_argument("--models", default="lstm,rnn", help="comma-separated model names (default lstm,rnn)")
    sweep.add_argument("--drivers", help="comma-separated driver names (default: all)")
    sweep.add_argument("--lengths", default="16,32,64,128,256", help="trip counts (T or K), comma-separated")
    sweep.add_argument("--hidden", default="", help="widths (H or n) at the base length, comma-separated")
    sweep.add_argument("--sizes", help="base sizes for every row, e.g. B=16,I=64,H=128")
    sweep.add_argument("--dtypes", default="float32", help=f"comma-separated, from {', '.join(DTYPES)}; "
                       "swept one after another (default float32)")
    sweep.add_argument("--dtype", dest="dtypes", help=argparse.SUPPRESS)  # the old spelling
    sweep.add_argument("--threads", type=int, default=CORES, help="threads per framework")
    sweep.add_argument("--budget", type=float, default=0.5, help="seconds of repeats per timed quantity")
    sweep.add_argument("--driver-budget", type=float, default=120.0, help="wall seconds per (model, driver) over the sweep")
    sweep.add_argument("--timeout", type=float, default=600.0, help="seconds before any one row is killed")
    sweep.add_argument("--out", help="results file (JSON Lines; default results/sweep-<timestamp>.jsonl)")
    fuzz = sub.add_parser("fuzz", help="random step bodies on every driver, gradients (and H v) vs float64 finite differences")
    fuzz.add_argument("--cases", type=int, default=100, help="number of bodies (default 100)")
    fuzz.add_argument("--seed", type=int, default=0, help="body stream seed (default 0)")
    fuzz.add_argument("--drivers", help="comma-separated driver names (default: every eager and jax driver that "
                      "runs a user step here; name compiled ones to include them, ~5 s per body each)")
    fuzz.add_argument("--dtypes", default="float64", help="comma-separated, from float64, float32: fuzzed one after "
                      "another (default float64; second order is checked at float64 only)")
    fuzz.add_argument("--dtype", dest="dtypes", help=argparse.SUPPRESS)  # the old spelling
    fuzz.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    fuzz.add_argument("--losses", default=",".join(losses.CHECKED),
                      help="comma-separated loss forms every body is judged under, from " + ", ".join(losses.FORMS)
                      + f" (default {','.join(losses.CHECKED)})")
    fuzz.add_argument("--no-second-order", dest="second_order", action="store_false", help="skip the H v check")
    fuzz.add_argument("--shrink", type=int, default=1, help="failures shrunk per (driver, status) (default 1)")
    fuzz.add_argument("--repro-dir", help="write a standalone repro script for each shrunk failure here")
    fuzz.add_argument("--timeout", type=float, default=300.0, help="seconds per (body, driver) before the worker is killed")
    fuzz.add_argument("--out", help="results file: one JSON record per (body, driver, dtype) outcome, written as each "
                      "finishes (default results/fuzz-<timestamp>.jsonl)")
    fuzz.add_argument("--resume", action="store_true", help="continue --out: outcomes already recorded there are not "
                      "run again (same arguments required)")
    for command in (run, sweep, fuzz, versions):
        _executor_flags(command)
    report = sub.add_parser("report", help="charts (PNG) and an HTML page from results files")
    report.add_argument("files", nargs="+")
    report.add_argument("--out-dir", default="results/report", help="where to write the PNGs and index.html")
    return p


def _executor_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument("--executor", choices=("local", "ray"), default="local",
                         help="where the work runs: local worker processes (default) or a Ray cluster "
                         "(a local instance rnnbench starts and stops, or --address)")
    command.add_argument("--address", help="with --executor ray: the Ray cluster to connect to (e.g. HOST:6379); "
                         "it is never stopped")


def _settings(args) -> dict[str, Any]:
    """RUN_DEFAULTS, overridden by the config file, overridden by flags given; numbers checked."""
    settings = {**RUN_DEFAULTS, **_load_config(args.config)}
    for key in RUN_DEFAULTS:
        if getattr(args, key) is not None:
            settings[key] = (key, getattr(args, key), "--" + key.replace("_", "-")) if key in NUMERIC else getattr(args, key)
    return _check_limits(settings)


def _check_limits(settings: dict[str, Any]) -> dict[str, Any]:
    """Each numeric setting, given as (key, value, where it came from), checked and unwrapped."""
    out = dict(settings)
    for key in NUMERIC:
        given = settings[key]
        if not isinstance(given, tuple):
            continue  # a default
        _, value, where = given
        if key == "seed":
            out[key] = _number(where, value, integer=True, inclusive=True)
        elif key == "threads":
            out[key] = _threads(where, value)
        elif key == "memory_limit_gb":
            out[key] = _number(where, value, minimum=0.0)
        else:
            out[key] = _number(where, value, maximum=MAX_SECONDS)
    if out["threads"] is None:
        out["threads"] = CORES
    return out


def _check_drivers_runnable(names: list[str], explicit: bool) -> None:
    """A driver named explicitly whose framework is missing from this (main) environment is bad
    input. A missing *other* environment is not: its rows say how to create it."""
    if not explicit:
        return
    for name in names:
        d = registry.get_driver(name)
        if d.environments == ("main",):
            reason = d.available()
            if reason:
                raise UsageError(f"driver {name!r} cannot run here: {reason}; install it with `make venv`")


def _suite_names(selection: Any, items: dict[str, Any]) -> list[str]:
    """The names a suite selects on one axis (SUITES) among registry `items` (models or drivers)."""
    if isinstance(selection, tuple):
        return list(selection)
    return [name for name, item in items.items() if selection in ("all", item.suite)]


def _jobs(args, s: dict[str, Any]) -> list[Job]:
    if s["suite"] not in SUITES:
        raise UsageError(f"unknown suite {s['suite']!r}; known: {', '.join(SUITES)}")
    suite = SUITES[s["suite"]]
    models = (_names(s["models"], list(registry.models()), "model") if s["models"]
              else _suite_names(suite["models"], registry.models()))
    drivers = (_names(s["drivers"], list(registry.drivers()), "driver") if s["drivers"]
               else _suite_names(suite["drivers"], registry.drivers()))
    # Named drivers run in each of their default environments (naming torch_xla_loop means running
    # it); the suite's environments hold for the suite's own drivers.
    suite_envs = "default" if s["drivers"] else suite["environments"]
    envs = (_names(s["environments"], list(environments.environments()), "environment") if s["environments"]
            else environments.default_names() if suite_envs == "default" else list(suite_envs))
    dtypes = _names(s["dtypes"], DTYPES, "dtype")
    if s["device"] not in DEVICES:
        raise UsageError(f"unknown device {s['device']!r}; known: {', '.join(DEVICES)}")
    for d in dtypes:
        tolerance(d, "analytic")
    size_sets = [_sizes(s["sizes"], models)] if s["sizes"] or "sizes" not in suite else list(suite["sizes"])
    try:
        loss_forms = losses.parse(str(s["losses"]), [losses.MODEL_LOSS])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if str(s["order"]) not in ("1", "2", "auto"):
        raise UsageError(f"order must be 1, 2 or auto, got {s['order']!r}")
    _check_drivers_runnable(drivers, explicit=bool(s["drivers"]))
    timing = TimingConfig(budget_s=float(s["budget"]))
    jobs = [
        Job(m, d, dtype, s["device"], dict(sizes), int(s["seed"]), int(s["threads"]), timing, not args.no_time, env,
            loss_form, _order(str(s["order"]), registry.get_model(m), dtype))
        for dtype in dtypes
        for m in models
        for sizes in size_sets
        for loss_form in loss_forms
        for d in drivers
        for env in envs
        if environments.runs(registry.get_driver(d), env)
    ]
    shard = _shard(args.shard)
    if shard:
        i, n = shard
        jobs = [j for k, j in enumerate(sorted(jobs, key=Job.key)) if k % n == i - 1]
    return jobs


def _order(value: str, model, dtype: str) -> int:
    """auto: the H v check joins float64 rows of core models (measured cost: docs/checking.md)."""
    if value == "auto":
        return 2 if dtype == "float64" and model.suite == "core" else 1
    return int(value)


def _out_path(value: Optional[str], default_name: str, resume: bool = False) -> Path:
    """The results file to write (its parent is created); the file itself is opened, locked and
    checked by record.ResultsFile."""
    if resume and not value:
        raise UsageError("--resume needs --out FILE (the results file to continue)")
    path = Path(value) if value else Path("results") / time.strftime(default_name)
    try:
        if resume and not path.is_file():
            raise UsageError(f"--resume: results file {path} does not exist")
        parent = path.parent if str(path.parent) else Path(".")
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write results file {path}: {exc.strerror}") from None
    return path


def _cmd_run(args) -> int:
    from rnnbench.report.progress import Progress
    from rnnbench.run.runner import Runner
    from rnnbench.run.timing import Roofline, load_line, warm_cache_env

    s = _settings(args)
    executors.check_executor(args.executor, args.address)
    jobs = _jobs(args, s)
    out = _out_path(args.out, "run-%Y%m%d-%H%M%S.jsonl", args.resume)
    _create_named_environments(s["environments"], {j.environment for j in jobs})
    with record.ResultsFile(out, resume=args.resume) as results:
        isolation.results_file(out, resumable=True)  # an interruption says what is kept and how to continue
        skipped, jobs = _not_yet_recorded(jobs, out, results) if args.resume else (0, jobs)
        start = time.perf_counter()
        print(f"rnnbench: {len(jobs)} rows -> {out}" + (f" ({skipped} already done, skipped)" if skipped else ""), flush=True)
        load = load_line(int(s["threads"]))  # read before this run adds its own load
        print(f"rnnbench: {load}", flush=True)
        # The GEMM peak, once per machine and dtype, at the rows' threads and CPUs (cached per machine):
        # every timed row gets GFLOP/s and its fraction of it (on a Ray node, that node's peak).
        timed = {} if args.no_time or s["device"] != "cpu" else {
            dtype: [registry.get_model(j.model).sizes_with_defaults(j.sizes) for j in jobs if j.dtype == dtype]
            for dtype in sorted({j.dtype for j in jobs})}
        roofline = Roofline(int(s["threads"]), timed)
        roofline.measure(warn=lambda message: print(message, flush=True))
        progress = Progress(len(jobs))
        # Compile caches persist across runs (timing.warm_cache_env, called where the rows run): a
        # repeated run recompiles nothing it compiled before; `sweep` and the idiomatic comparison
        # time cold first calls instead.
        with executors.executor(args.executor if jobs else "local", args.address) as executor:
            runner = Runner(results, float(s["timeout"]), progress.start, progress.done, s["memory_limit_gb"],
                            extra_env=warm_cache_env, annotate=roofline, executor=executor)
            records = runner.run(jobs)
        progress.close()
        if args.resume:
            records = record.latest_per_row(results.existing + records)
    print()
    print(format_table(records))
    reports = failure_reports(records)
    if reports:
        print("\n" + reports)
    above = [r for r in records if any(q["fraction_of_peak"] > 1.0 for q in (r.get("roofline") or {}).values())]
    if above:  # the peak is meant to be a ceiling: a row above it means the peak missed a faster GEMM
        print(f"rnnbench: {len(above)} row(s) above the GEMM peak (e.g. {above[0]['model']}/{above[0]['driver']}): "
              "the peak measurement missed a faster GEMM; the % peak column is not a ceiling in this run")
    print(f"\n{summary(records)} in {time.perf_counter() - start:.0f} s; {load}; records in {out}")
    return 1 if any(is_failing(r["status"]) for r in records) else 0


def _not_yet_recorded(jobs: list[Job], out: Path, results: record.ResultsFile) -> tuple[int, list[Job]]:
    """--resume: how many of `jobs` `out` already records (skipped), and the rest, to run
    (record.resume_plan reruns or refuses records of another version or settings)."""
    wanted = [(j.key(), j.fingerprint(), j.settings(), f"{j.model}/{j.driver}/{j.environment}/{j.dtype}") for j in jobs]
    todo = record.resume_plan(out, results.existing, wanted)
    return len(jobs) - len(todo), [jobs[i] for i in todo]


def _create_named_environments(selection: Optional[str], used: set[str]) -> None:
    """Create the environments a run names (--environments or a config) that are missing, live in
    rnnbench's cache and have rows: created on first use. A default run creates nothing; main
    and xla are created by their make targets (their rows say so)."""
    if not selection:
        return
    for name in _names(selection, list(environments.environments()), "environment"):
        env = environments.get(name)
        if name in used and env.missing_reason() and env.on_demand:
            environments.create(name, log=lambda line: print(f"rnnbench: {line}", flush=True))


def _cmd_versions(args) -> int:
    """Run the probes of rnnbench.run.bug_versions in each environment (created where
    missing), then print the bug x version table."""
    from rnnbench.run import bug_versions
    from rnnbench.report.progress import Progress
    from rnnbench.run.runner import Runner

    if args.from_files:
        paths = [Path(f) for f in args.from_files]
        for p in paths:
            if not p.is_file():
                raise UsageError(f"results file {p} does not exist")
        print(bug_versions.format_table(record.load(paths)))
        return 0
    timeout = _number("--timeout", args.timeout, maximum=MAX_SECONDS)
    executors.check_executor(args.executor, args.address)
    envs = _names(args.environments, list(environments.environments()), "environment")
    jobs = bug_versions.probe_jobs(envs)
    out = _out_path(args.out, "versions-%Y%m%d-%H%M%S.jsonl", args.resume)
    _create_named_environments(",".join(envs), {j.environment for j in jobs})
    with record.ResultsFile(out, resume=args.resume) as results:
        isolation.results_file(out, resumable=True)
        skipped, jobs = _not_yet_recorded(jobs, out, results) if args.resume else (0, jobs)
        print(f"rnnbench: {len(jobs)} rows in {len(envs)} environments -> {out}"
              + (f" ({skipped} already done, skipped)" if skipped else ""), flush=True)
        progress = Progress(len(jobs))
        with executors.executor(args.executor if jobs else "local", args.address) as executor:
            Runner(results, timeout, progress.start, progress.done, executor=executor).run(jobs)
        progress.close()
    print("\n" + bug_versions.format_table(record.load([out])))
    return 0


def _cmd_env(args) -> int:
    envs = environments.environments()
    if args.action == "list":
        for name, env in envs.items():
            state = env.missing_reason() and "missing" or ", ".join(f"{p} {v}" for p, v in environments.package_versions(name)
                                                                    if p != "numpy")
            print(f"{name:<14} {'default' if env.default else 'matrix':<8} {state}\n{'':<24}{env.python}")
        return 0
    names = _names(",".join(args.names), list(envs), "environment", required=True)
    for name in names:
        env = environments.create(name, log=lambda line: print(f"rnnbench: {line}", flush=True))
        print(f"{name}: {env.python}")
    return 0


def _cmd_list(args) -> int:
    print("models:")
    for m in registry.models().values():
        sizes = ",".join(f"{k}={v}" for k, v in m.default_sizes.items())
        print(f"  {m.name:<18} {sizes:<22} oracle={m.oracle_kind:<13} {m.summary}")
    print("drivers:")
    for d in registry.drivers().values():
        reasons = []
        in_envs = [name for name in environments.environments() if environments.runs(d, name)]
        for name in in_envs:
            env = environments.environments().get(name)
            reason = env.missing_reason() if env else f"unknown environment {name}"
            if reason is None and name == environments.current():
                reason = d.available()
            if reason:
                reasons.append(f"{name}: {reason}")
        envs = ",".join(in_envs)
        print(f"  {d.name:<34} [{envs}] {d.summary}" + (f"  (unavailable: {'; '.join(reasons)})" if reasons else ""))
    return 0


def _cmd_table(args) -> int:
    paths = [Path(f) for f in args.files]
    for p in paths:
        if not p.is_file():
            raise UsageError(f"results file {p} does not exist")
    records = record.load(paths)
    print(format_table(records, include_unavailable=args.all))
    reports = failure_reports(records)
    if reports:
        print("\n" + reports)
    return 0


def _int_list(value: str, what: str) -> list[int]:
    out = []
    for item in value.split(","):
        if not item.strip():
            continue
        try:
            n = int(item)
        except ValueError:
            raise UsageError(f"{what} value {item.strip()!r} is not an integer") from None
        if n <= 0:
            raise UsageError(f"{what} value {n} must be positive")
        out.append(n)
    return out


def _cmd_sweep(args) -> int:
    from rnnbench.run.sweep import SweepPlan, run_sweep

    models = _names(args.models, list(registry.models()), "model")
    drivers = _names(args.drivers, list(registry.drivers()), "driver")
    dtypes = _names(args.dtypes, DTYPES, "dtype", required=True)
    _threads("--threads", args.threads)
    for flag in ("budget", "driver_budget", "timeout"):
        _number("--" + flag.replace("_", "-"), getattr(args, flag), maximum=MAX_SECONDS)
    lengths, hidden = _int_list(args.lengths, "--lengths"), _int_list(args.hidden, "--hidden")
    executors.check_executor(args.executor, args.address)
    if not lengths and not hidden:
        raise UsageError("nothing to sweep: give --lengths and/or --hidden")
    plans = [SweepPlan(models, drivers, lengths, hidden, _sizes(args.sizes, models), dtype, args.threads,
                       TimingConfig(budget_s=args.budget), args.driver_budget, args.timeout) for dtype in dtypes]
    out = _out_path(args.out, "sweep-%Y%m%d-%H%M%S.jsonl")
    start = time.perf_counter()

    def progress(rec: dict) -> None:
        t = rec.get("fwd_bwd")
        extra = f" fwd+bwd {t['median_ms']:.3g} ms" if t and rec["status"] == "ok" else f" {rec.get('reason', '')}"
        sizes = ",".join(f"{k}={v}" for k, v in rec["sizes"].items())
        print(f"  {rec['model']:<10} {rec['driver']:<20} {sizes:<22} {rec['status']}{extra}", flush=True)

    with record.ResultsFile(out) as results:
        isolation.results_file(out, resumable=False)
        print(f"rnnbench: sweep -> {out}", flush=True)
        with executors.executor(args.executor, args.address) as executor:
            records = [rec for plan in plans for rec in run_sweep(plan, results, progress, executor)]
    print(f"\n{summary(records)} in {time.perf_counter() - start:.0f} s; records in {out}")
    return 1 if any(is_failing(r["status"]) for r in records) else 0


def _cmd_report(args) -> int:
    paths = [Path(f) for f in args.files]
    for p in paths:
        if not p.is_file():
            raise UsageError(f"results file {p} does not exist")
    warnings: list[str] = []
    records = record.load(paths, warn=warnings.append)
    if not records:
        raise UsageError("no records in the given files" + (" (only an incomplete last line)" if warnings else ""))
    for warning in warnings:
        print(warning, file=sys.stderr)
    from rnnbench.report.html import write_report

    out_dir = Path(args.out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out_dir}: {exc.strerror}") from None
    page = write_report(records, out_dir)
    print(f"rnnbench: report -> {page}")
    return 0


def fuzz_drivers(value: Optional[str], dtype: str, device: str = "cpu") -> list:
    """Named drivers (each must run here and support a user step at `dtype` on `device`), or the
    default set: every available eager / jax driver of this environment that runs an arbitrary step."""
    from rnnbench.run.row import unavailable_reason
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.grammar import generate
    from rnnbench.run.environments import current

    probe = build(generate(0, 0)).model
    here = [d for d in registry.drivers().values() if environments.runs(d, current())]
    if value:
        chosen = [registry.get_driver(n) for n in _names(value, [d.name for d in here], "driver")]
    else:
        chosen = [d for d in here if not (d.compiled and d.framework.slow_compile)]
    why = {d.name: unavailable_reason(probe, d, Job(probe.name, d.name, dtype, device, environment=current())) for d in chosen}
    for d in chosen:
        if why[d.name] and value:
            raise UsageError(f"driver {d.name!r} cannot fuzz here: {why[d.name]}")
    return [d for d in chosen if why[d.name] is None]


def _cmd_fuzz(args) -> int:
    _number("--cases", args.cases, integer=True)
    _number("--shrink", args.shrink, integer=True, inclusive=True)
    _number("--timeout", args.timeout, maximum=MAX_SECONDS)
    dtypes = _names(args.dtypes, ("float64", "float32"), "fuzzing dtype", required=True)
    try:
        loss_forms = losses.parse(args.losses, losses.CHECKED)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if losses.MODEL_LOSS in loss_forms:
        raise UsageError("a fuzzed body has no model loss of its own: choose from " + ", ".join(losses.FORMS))
    if args.device not in DEVICES:
        raise UsageError(f"unknown device {args.device!r}; known: {', '.join(DEVICES)}")
    executors.check_executor(args.executor, args.address)
    drivers = {dtype: fuzz_drivers(args.drivers, dtype, args.device) for dtype in dtypes}
    if not all(drivers.values()):
        raise UsageError(f"no driver can fuzz here on {args.device} (install the main environment with `make venv`)")
    repro_dir = Path(args.repro_dir) if args.repro_dir else None
    if repro_dir is not None:
        try:
            repro_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create {repro_dir}: {exc.strerror}") from None
    from rnnbench.fuzz.isolated import fuzz_isolated
    from rnnbench.fuzz.runner import Campaign, fuzz_settings, resume

    names = {dtype: [d.name for d in drivers[dtype]] for dtype in dtypes}
    settings = fuzz_settings(args.seed, args.second_order, args.shrink, args.device, loss_forms, args.timeout)
    campaigns = [Campaign(args.cases, args.seed, names[dtype], dtype, args.device, tuple(loss_forms), settings)
                 for dtype in dtypes]
    out = _out_path(args.out, "fuzz-%Y%m%d-%H%M%S.jsonl", args.resume)
    start = time.time()
    failures = errors = 0
    with record.ResultsFile(out, resume=args.resume) as results:
        isolation.results_file(out, resumable=True)  # an interruption names the file and how to continue it
        done = resume(out, results.existing, campaigns) if args.resume else {dtype: [] for dtype in dtypes}
        already = sum(map(len, done.values()))
        print(f"rnnbench: fuzz -> {out}" + (f" ({already} records already there, not run again)" if already else ""),
              flush=True)
        with executors.executor(args.executor, args.address) as executor:
            for dtype in dtypes:
                summary = fuzz_isolated(args.cases, args.seed, names[dtype], dtype, args.second_order,
                                        args.shrink, repro_dir, args.timeout,
                                        progress=lambda m: print(f"\r{m} ({time.time() - start:.0f} s)   ", end="",
                                                                 file=sys.stderr, flush=True),
                                        device=args.device, losses=loss_forms, write=results.append, done=done[dtype],
                                        executor=executor)
                print(file=sys.stderr)
                print(summary.format())
                failures += len(summary.failures)
                errors += sum(o.errored for o in summary.outcomes)
        written = results.written
    print(f"\nrnnbench fuzz: {failures} mismatches, {errors} driver errors in {time.time() - start:.0f} s; "
          f"{written} records written now" + (f", {already} from before" if already else "") + f"; records in {out}",
          file=sys.stderr)
    return 1 if failures or errors else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line's one error boundary. Exit codes: 0 and 1 as the command says (1: a row
    failed); 2 bad input (InputError: one line `rnnbench: error: ...`, nothing written); 1 an
    internal error (any other exception: one line `rnnbench: internal error: <Type>: <message>
    (full traceback: <file>)`, the traceback saved under $XDG_CACHE_HOME/rnnbench/tracebacks or
    ~/.cache/rnnbench/tracebacks); 128+N when cut short by signal N (130 SIGINT, 143 SIGTERM,
    129 SIGHUP: one line saying what is kept and how to continue) and 141 when stdout's reader
    went away (`rnnbench ... | head`). Every way out ends the workers (their process groups) and
    removes the run's temporary files (rnnbench.run.isolation)."""
    import contextlib
    import signal
    import traceback


    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]

    def say(line: str) -> None:
        try:
            print(line if isolation.stderr_at_line_start() else "\n" + line, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass

    def internal_error(exc: BaseException) -> int:
        text = "".join(traceback.format_exception(exc))
        message = (str(exc).strip().splitlines() or [""])[0][:300]
        what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
        try:
            cache = os.environ.get("XDG_CACHE_HOME", "")
            folder = (Path(cache) if os.path.isabs(cache) else Path.home() / ".cache") / "rnnbench" / "tracebacks"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
            with open(path, "x") as f:
                f.write(f"rnnbench {' '.join(argv)}\npython {sys.version.split()[0]} on {sys.platform}, "
                        f"{time.strftime('%Y-%m-%d %H:%M:%S %z')}\n\n{text}")
            for old in sorted(folder.glob("*.txt"))[:-50]:  # keep the newest 50
                old.unlink(missing_ok=True)
        except (OSError, RuntimeError, KeyError) as why:  # no home, read-only cache: print it instead
            say(f"rnnbench: internal error: {what} (could not save the traceback: {why}; here it is)")
            say(text.rstrip())
            return 1
        say(f"rnnbench: internal error: {what} (full traceback: {path})")
        return 1

    try:
        with isolation.handle_signals(), isolation.watch_stdout(), isolation.track_stderr():
            try:
                args = _parser().parse_args(argv)
            except SystemExit:  # --help printed (argparse swallows write errors): was it delivered?
                sys.stdout.flush()
                if isolation.stdout_closed():
                    raise BrokenPipeError("stdout closed") from None
                raise
            command = {"run": _cmd_run, "list": _cmd_list, "table": _cmd_table, "sweep": _cmd_sweep,
                       "report": _cmd_report, "fuzz": _cmd_fuzz,
                       "env": _cmd_env, "versions": _cmd_versions}[args.command]
            return command(args)
    except InputError as exc:
        say(f"rnnbench: error: {exc}")
        return 2
    except KeyboardInterrupt as exc:  # isolation.Interrupted for SIGTERM and SIGHUP too
        signum = getattr(exc, "signum", signal.SIGINT)
        with contextlib.suppress(OSError, ValueError):
            if sys.stdout.isatty():
                print(flush=True)  # off the progress bar's line
        say(isolation.exit_line(f"interrupted by {signal.Signals(signum).name}"))
        return 128 + signum
    except BrokenPipeError as exc:
        if not isolation.stdout_closed():
            return internal_error(exc)
        isolation.silence_stdout()
        if isolation.has_results_file():  # quiet otherwise, as `list | head` should be
            say(isolation.exit_line("output closed"))
        return 128 + signal.SIGPIPE
    except record.WriteFailed as exc:  # the machine refused a write (disk full): not a bug of ours
        say(f"rnnbench: error: {exc.strerror or exc}")
        return 1
    except Exception as exc:
        return internal_error(exc)


if __name__ == "__main__":
    sys.exit(main())
