"""What the subcommands share: the parser class (bad input is one line, exit code 2), the number
validators of flags and config keys, the config file, the executor flags, the results file path,
and the environments a command creates on first use."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rnnbench import inputs
from rnnbench.errors import InputError, did_you_mean
from rnnbench.run import environments, plan

UsageError = InputError  # bad input: one line, exit code 2

CORES = len(os.sched_getaffinity(0))
MAX_SECONDS = 7 * 24 * 3600.0  # a limit beyond a week is a typo, and larger ones overflow timers

SELECTIONS = ("models", "drivers", "environments", "dtypes", "losses")
NUMERIC = ("seed", "threads", "budget", "timeout", "memory_limit_gb", "compile_budget")


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + exits 2; we want one line
        raise UsageError(message)


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


def threads(what: str, value: Any) -> int:
    return number(what, value, integer=True, maximum=CORES)


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


def load_config(path: str | None) -> dict[str, Any]:
    """The settings of a TOML config file, each checked for its type (numbers are checked with the
    flags' in check_limits; until then they travel as (key, value, where) to name their origin)."""
    if path is None:
        return {}
    config = _read_toml(path)
    if isinstance(config.get("environments"), dict):  # [environments.<name>] tables: definitions, run in them
        names = environments.add_definitions(config["environments"], f"config file {path}")
        if not names:
            raise UsageError(f"config file {path}: the [environments] table defines no environment")
        config["environments"] = ",".join(names)
    unknown = sorted(set(config) - set(plan.RUN_DEFAULTS))
    if unknown:
        raise UsageError(
            f"config file {path}: unknown key(s) {', '.join(unknown)}"
            f"{did_you_mean(unknown[0], plan.RUN_DEFAULTS)}; "
            f"known: {', '.join(plan.RUN_DEFAULTS)}"
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
        elif key in NUMERIC:
            continue  # checked with the flags' values in check_limits
        elif not isinstance(value, str):
            expected = "a string or a list of strings" if key in SELECTIONS else "a string"
            if key == "sizes":
                expected = 'a table (e.g. sizes = {T = 64}) or a string "T=64,H=128"'
            raise UsageError(f"{where} must be {expected}, got {type(value).__name__} {value!r}")
    for key in NUMERIC:
        if key in config:
            config[key] = (key, config[key], f"config file {path}: key {key!r}")
    return config


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """RUN_DEFAULTS, overridden by the config file, overridden by flags given; numbers checked."""
    config = load_config(args.config)
    suite = plan.SUITES.get(args.suite or config.get("suite") or plan.RUN_DEFAULTS["suite"])
    out = {**plan.RUN_DEFAULTS, **(suite.defaults() if suite else {}), **config}  # e.g. gpu: device, timeout
    for key in plan.RUN_DEFAULTS:
        if getattr(args, key) is not None:
            given = getattr(args, key)
            out[key] = (key, given, "--" + key.replace("_", "-")) if key in NUMERIC else given
    return check_limits(out)


def check_limits(given: dict[str, Any]) -> dict[str, Any]:
    """Each numeric setting, given as (key, value, where it came from), checked and unwrapped."""
    out = dict(given)
    for key in NUMERIC:
        if not isinstance(given[key], tuple):
            continue  # a default
        _, value, where = given[key]
        if key == "seed":
            out[key] = number(where, value, integer=True, inclusive=True)
        elif key == "threads":
            out[key] = threads(where, value)
        elif key in ("memory_limit_gb", "compile_budget"):
            out[key] = number(where, value, minimum=0.0)
        else:
            out[key] = number(where, value, maximum=MAX_SECONDS)
    if out["threads"] is None:
        out["threads"] = CORES
    return out


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


def out_path(value: str | None, default_name: str, resume: bool = False) -> Path:
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


def create_named_environments(selection: str | None, used: set[str]) -> None:
    """Create the environments a run names (--environments or a config) that are missing, live in
    rnnbench's cache and have rows: created on first use. A default run creates nothing; main
    and xla are created by their make targets (their rows say so)."""
    if not selection:
        return
    for name in plan.names(selection, list(environments.environments()), "environment"):
        env = environments.get(name)
        if name in used and env.missing_reason() and env.on_demand:
            environments.create(name, log=lambda line: print(f"rnnbench: {line}", flush=True))
