"""What the subcommands share: the parser class (bad input is one line, exit code 2), the option
groups (--out, --timeout, the selection flags, the executor flags), the number validators of flags
and config keys, `run`'s settings (the config file and the flags, checked once into a RunSettings),
the results file path, and the environments a command creates on first use."""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rnnbench import inputs, losses, registry
from rnnbench import modes as differentiation_modes
from rnnbench.errors import InputError, did_you_mean
from rnnbench.machine import env_create, environments
from rnnbench.model import DTYPES
from rnnbench.planning import plan
from rnnbench.planning.settings import CONFIG_KEYS, CORES, RunSettings
from rnnbench.suites import SUITES

UsageError = InputError  # bad input: one line, exit code 2

MAX_SECONDS = 7 * 24 * 3600.0  # a limit beyond a week is a typo, and larger ones overflow timers

# How each numeric setting is checked (number()), whether a flag or a config key gives it.
LIMITS: dict[str, dict[str, Any]] = {
    "seed": {"integer": True, "inclusive": True},
    "threads": {"integer": True, "maximum": CORES},
    "budget": {"maximum": MAX_SECONDS},
    "timeout": {"maximum": MAX_SECONDS},
    "memory_limit_gb": {},
    "compile_budget": {},
}
SELECTIONS = ("models", "drivers", "environments", "dtypes", "losses")  # the axes of selection()


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + exits 2; we want one line
        raise UsageError(message)


def selection(p: argparse.ArgumentParser, *, resume: str | None = None, **axes: str | tuple[str, str]) -> None:
    """The selection flags a command takes: each of SELECTIONS it names, as `axis=help` (what the
    command makes of it, its default included) or `axis=(default, help)`; then --resume with its
    help. --dtype is the old spelling of --dtypes."""
    for axis, spec in axes.items():
        default, says = spec if isinstance(spec, tuple) else (None, spec)
        p.add_argument(f"--{axis}", default=default, help=f"comma-separated {axis} {says}")
        if axis == "dtypes":
            p.add_argument("--dtype", dest="dtypes", help=argparse.SUPPRESS)
    if resume:
        p.add_argument("--resume", action="store_true", help=resume)


def out_option(p: argparse.ArgumentParser, command: str, what: str = "JSON Lines") -> None:
    """--out: the results file `command` writes (out_path names the default)."""
    p.add_argument("--out", help=f"results file ({what}; default results/{command}-<timestamp>.jsonl)")


def timeout_option(p: argparse.ArgumentParser, seconds: float, what: str = "a row", configurable: bool = False) -> None:
    """--timeout: seconds before `what` is killed (configurable: None, for `run`'s settings to default)."""
    says = f"seconds before {what} is killed (default {seconds:g})"
    p.add_argument("--timeout", type=float, default=None if configurable else seconds, help=says)


def number(
    what: str,
    value: Any,
    *,
    integer: bool = False,
    maximum: float | None = None,
    minimum: float = 0.0,
    inclusive: bool = False,
) -> Any:
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


def shard(value: str | None) -> tuple[int, int] | None:
    """--shard I/N as (I, N), or None."""
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


def _read_toml(path: str) -> dict[str, Any]:
    import tomllib

    data = inputs.read_regular_file(path, "config file")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None


def load_config(path: str) -> dict[str, Any]:
    """The settings of a TOML config file, each checked for its type, selections and sizes as the
    flags spell them (numbers are checked with the flags' in settings)."""
    config = _read_toml(path)
    if isinstance(config.get("environments"), dict):  # [environments.<name>] tables: definitions, run in them
        names = environments.add_definitions(config["environments"], f"config file {path}")
        if not names:
            raise UsageError(f"config file {path}: the [environments] table defines no environment")
        config["environments"] = ",".join(names)
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise UsageError(
            f"config file {path}: unknown key(s) {', '.join(unknown)}"
            f"{did_you_mean(unknown[0], CONFIG_KEYS)}; known: {', '.join(CONFIG_KEYS)}"
        )
    for key, value in config.items():
        where = f"config file {path}: key {key!r}"
        if key in SELECTIONS and isinstance(value, list) and all(isinstance(v, str) for v in value):
            config[key] = ",".join(value)  # lists are accepted as well as "a,b"
        elif key == "sizes" and isinstance(value, dict):
            for name, n in value.items():
                number(f"{where}: size {name!r}", n, integer=True)
            config[key] = ",".join(f"{k}={v}" for k, v in value.items())
        elif key == "order" and isinstance(value, int) and not isinstance(value, bool):
            config[key] = str(value)
        elif key not in LIMITS and not isinstance(value, str):
            expected = "a string or a list of strings" if key in SELECTIONS else "a string"
            if key == "sizes":
                expected = 'a table (e.g. sizes = {T = 64}) or a string "T=64,H=128"'
            raise UsageError(f"{where} must be {expected}, got {type(value).__name__} {value!r}")
    return config


def settings(args: argparse.Namespace) -> RunSettings:
    """`run`'s settings: RunSettings' defaults, overridden by the suite's (e.g. gpu: device, timeout),
    by the config file, by the flags given; every value checked here, once."""
    config = load_config(args.config) if args.config else {}
    flags = {key: getattr(args, key) for key in CONFIG_KEYS if getattr(args, key) is not None}
    where = {key: f"config file {args.config}: key {key!r}" for key in config}
    where.update({key: "--" + key.replace("_", "-") for key in flags})
    suite = SUITES.get(args.suite or config.get("suite") or RunSettings.suite)
    given = {**(suite.defaults() if suite else {}), **config, **flags}
    for key, limits in LIMITS.items():
        if key in where:
            given[key] = number(where[key], given[key], **limits)
    return _typed(
        given,
        timed=not args.no_time,
        shard=shard(args.shard),
        profile=getattr(args, "profile", False),
        roads=getattr(args, "roads", False),
    )


def _typed(given: dict[str, Any], **flags_only: Any) -> RunSettings:
    """RunSettings of the `given` values (CONFIG_KEYS; selections comma-separated, numbers checked),
    each checked in the order of CONFIG_KEYS; what is not given keeps RunSettings' default."""
    suite = given.get("suite", RunSettings.suite)
    if suite not in SUITES:
        raise UsageError(f"unknown suite {suite!r}{did_you_mean(suite, SUITES)}; known: {', '.join(SUITES)}")

    def named(key: str, known: Iterable[str], what: str) -> tuple[str, ...] | None:
        return tuple(plan.names(given[key], list(known), what)) if given.get(key) else None

    out: dict[str, Any] = {
        "suite": suite,
        "models": named("models", registry.models(), "model"),
        "drivers": named("drivers", registry.drivers(), "driver"),
        "environments": named("environments", environments.environments(), "environment"),
        **{key: given[key] for key in LIMITS if key in given},
        **flags_only,
    }
    if "dtypes" in given:
        out["dtypes"] = tuple(plan.names(given["dtypes"], DTYPES, "dtype"))
    if given.get("device", RunSettings.device) not in plan.DEVICES:
        raise UsageError(f"unknown device {given['device']!r}; known: {', '.join(plan.DEVICES)}")
    out["device"] = given.get("device", RunSettings.device)
    out["sizes"] = plan.parse_sizes(given["sizes"]) if given.get("sizes") else None
    try:
        out["losses"] = tuple(losses.parse(str(given.get("losses", "")), RunSettings.losses))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if given.get("modes"):
        try:
            out["modes"] = differentiation_modes.parse(str(given["modes"]))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    out["order"] = str(given.get("order", RunSettings.order))
    if out["order"] not in ("1", "2", "auto"):
        raise UsageError(f"order must be 1, 2 or auto, got {given['order']!r}")
    out.update({key: float(given[key]) for key in ("budget", "timeout") if key in given})
    return RunSettings(**out)


def executor_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where the work runs: local worker processes (default) or a Ray cluster "
        "(a local instance rnnbench starts and stops, or --address)",
    )
    command.add_argument(
        "--address", help="with --executor ray: the Ray cluster to connect to (e.g. HOST:6379); it is never stopped"
    )


def out_path(value: str | None, command: str, resume: bool = False) -> Path:
    """The results file to write (--out, else results/<command>-<timestamp>.jsonl; its parent is
    created); the file itself is opened, locked and checked by results_file.ResultsFile."""
    if resume and not value:
        raise UsageError("--resume needs --out FILE (the results file to continue)")
    path = Path(value) if value else Path("results") / time.strftime(f"{command}-%Y%m%d-%H%M%S.jsonl")
    try:
        if resume and not path.is_file():
            raise UsageError(f"--resume: results file {path} does not exist")
        parent = path.parent if str(path.parent) else Path(".")
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write results file {path}: {exc.strerror}") from None
    return path


def writable_dir(path: Path, flag: str) -> Path:
    """An output directory, created if missing and proven writable before any work: a file is
    created in it and removed (a read-only file system or directory is refused up front)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create it ({exc.strerror or exc}); choose another {flag}") from None
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".rnnbench-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write there ({exc.strerror or exc}); choose another {flag}") from None
    return path


def results_files(files: list[str]) -> list[Path]:
    """The results files a command reads, each an existing file."""
    paths = [Path(f) for f in files]
    for p in paths:
        if not p.is_file():
            raise UsageError(f"results file {p} does not exist")
    return paths


def create_named_environments(named: Iterable[str] | None, used: set[str]) -> None:
    """Create the environments a run names (--environments or a config) that are missing, live in
    rnnbench's cache and have rows: created on first use. A default run creates nothing; main
    and xla are created by their make targets (their rows say so)."""
    for name in named or ():
        env = environments.get(name)
        if name in used and env.missing_reason() and env.on_demand:
            env_create.create(name, log=lambda line: print(f"rnnbench: {line}", flush=True))
