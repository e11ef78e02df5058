"""`rnnbench compare`: what changed between two results files (two commits, two framework
versions, two machines), and a gate that fails only on what is real.

    rnnbench compare BASE NEW [--threshold 10%] [--alpha 0.01] [--format text|markdown|json]
                     [--across-machines] [--normalize]
    rnnbench compare FILE... --environments A,B        two environments of one run (A: base)
    rnnbench compare --commits BASE NEW [run options]  run the selection at both commits, then compare

BASE and NEW are results files (JSON Lines records) or pytest-benchmark JSON files. Pairing,
verdicts and the exit code: rnnbench.report.compare.pairs; the interval: compare.stats; running two
commits: rnnbench.planning.commits. Exit codes: 1 on a status regression, a row slower beyond the
threshold, or a --commits run that crashed (one line naming it and its kept log); 3 when it
measured nothing (a side without any row, or no row judged on both sides: every one noisy, one-sided
or not run); 0 otherwise; 2 on bad input (a record or benchmark that is not possible, a side against
itself, two sides that hold rows but none in common).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from rnnbench.cli import options
from rnnbench.errors import InputError
from rnnbench.planning import commits
from rnnbench.report.compare import inputs as compare_inputs
from rnnbench.report.compare.format import FORMATS, nothing_measured, render
from rnnbench.report.compare.pairs import NOTHING_MEASURED, NothingMeasured, compare
from rnnbench.report.escape import terminal

NAME = "compare"
HELP = (
    "compare two results files (commits, framework versions, machines): verdicts per row, exit 1 on a "
    f"regression, {NOTHING_MEASURED} when it measured nothing"
)


# (base, new, run options, rounds, output directory) -> (base files, new files, side labels)
class RunCommits(Protocol):
    """What runs --commits: rnnbench.planning.commits.run_commits's signature."""

    def __call__(
        self, base: str, new: str, options: Mapping[str, str | bool], *, rounds: int, out_dir: Path
    ) -> tuple[list[Path], list[Path], tuple[str, str]]: ...


RUN_OPTIONS = tuple("suite models drivers environments dtypes sizes threads budget timeout losses".split())


# A plain decimal number (ASCII digits, an optional exponent): float() also takes "nan", "inf",
# "1_0" and other scripts' digits, none of which is a threshold anyone meant.
_DECIMAL = re.compile(r"\+?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)
THRESHOLD_MIN = 1e-4  # 0.01 %: below any timer's resolution, so no interval could ever be "same"


def threshold(value: str) -> float:
    """'10%' or '0.1' -> 0.1; a threshold must be a plain decimal fraction from THRESHOLD_MIN (0.01 %)
    to below 10 (1000 %)."""
    text = str(value).strip()
    number_text = text[:-1].strip() if text.endswith("%") else text
    if not _DECIMAL.fullmatch(number_text):
        raise InputError(f"--threshold {value!r} is not a percentage (e.g. 10%) or a fraction (e.g. 0.1)")
    number = float(number_text) / 100 if text.endswith("%") else float(number_text)
    if not math.isfinite(number) or not THRESHOLD_MIN <= number < 10:
        raise InputError(f"--threshold {value!r} must be from 0.01 % to below 1000 %")
    return number


DEFAULT_THRESHOLD = "10%"


def thresholds(given: list[str]) -> tuple[float, tuple[tuple[str, float], ...]]:
    """(the default threshold, (pattern, threshold) pairs) of --threshold values: "10%" sets the
    default (the last given wins), "jax_*=20%" a pattern's."""
    default, patterns = threshold(DEFAULT_THRESHOLD), []
    for value in given:
        pattern, sep, level = str(value).rpartition("=")
        if sep and not pattern.strip():
            raise InputError(f"--threshold {value!r}: no pattern before '=' (e.g. 'jax_*=20%')")
        if sep:
            patterns.append((pattern.strip(), threshold(level)))
        else:
            default = threshold(value)
    return default, tuple(patterns)


def config_thresholds(path: str) -> list[str]:
    """The `thresholds` of a compare config file, as --threshold values ("*" is the default)."""
    config = options._read_toml(path)  # the run config reader: regular, small, valid TOML
    unknown = sorted(set(config) - {"thresholds"})
    if unknown:
        raise InputError(f"config file {path}: unknown key(s) {', '.join(unknown)} (compare reads `thresholds`)")
    table = config.get("thresholds", {})
    if not isinstance(table, dict) or not all(isinstance(v, (str, int, float)) for v in table.values()):
        raise InputError(f'config file {path}: `thresholds` must be a table of pattern = "10%" (e.g. "jax_*" = "20%")')
    return [str(v) if k == "*" else f"{k}={v}" for k, v in table.items()]


def alpha(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"--alpha {value!r} is not a number") from None
    if not math.isfinite(number) or not 0 < number < 0.5:
        raise InputError(f"--alpha {value!r} must be above 0 and below 0.5 (0.01: 99 % intervals)")
    return number


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="*",
        help="BASE NEW: results files (.jsonl) or pytest-benchmark JSON, each side one "
        "file or several joined by commas (runs of one side: rounds); with --environments, one or more "
        "files holding both environments",
    )
    p.add_argument(
        "--threshold",
        action="append",
        help="smallest change of time that counts (default 10%%); PATTERN=10%% sets it for the rows whose "
        "driver or model/driver matches the shell pattern (the largest of those that match), e.g. "
        "--threshold 'jax_*=20%%' --threshold 10%%; repeatable",
    )
    p.add_argument(
        "--config",
        help="a TOML file whose `thresholds` table gives them as --threshold does, e.g. "
        'thresholds = {"jax_*" = "20%%", "*" = "10%%"} (flags come after the file\'s)',
    )
    p.add_argument("--alpha", default="0.01", help="1 - confidence of the intervals (default 0.01: 99 %%)")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), markdown (a table for pull requests, CI summaries), json, or github (a pull-request "
        "comment body and job summary: status changes first, then speed, then the noise; docs/ci.md). Exit codes, "
        "every format: 0 nothing wrong, 1 a status regression or a row decided slower, 2 bad input, "
        f"{NOTHING_MEASURED} measured nothing (a side without rows, or every row noisy, one-sided or not run)",
    )
    p.add_argument(
        "--across-machines", action="store_true", help="allow comparing files from two machines (every line says so)"
    )
    p.add_argument(
        "--normalize",
        action="store_true",
        help="divide every ratio by the median ratio of all timed rows "
        "(a machine's overall speed); for --across-machines gates",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="show where the time went (the profile difference: ops, compiled cost, Python functions) for every "
        "row profiled on both sides, not only those decided slower; with --commits, profile the runs' rows "
        "(`rnnbench run --profile`, which both commits must know)",
    )
    options.selection(
        p,
        environments="(BASE_ENV,NEW_ENV: compare two environments of the same files, by name (main, "
        "torch-2.14.1) or framework version (torch-2.13.0); with --commits, the run's environments)",
    )
    p.add_argument(
        "--commits",
        nargs=2,
        metavar=("BASE", "NEW"),
        help="run the selection at both commits here, "
        "interleaved in --rounds rounds (each commit installed apart), then compare",
    )
    p.add_argument("--rounds", type=int, default=3, help="with --commits: runs per commit, alternating (default 3)")
    p.add_argument("--out-dir", help="with --commits: where the runs' records go (default results/compare-<time>)")
    run = p.add_argument_group("run options (with --commits; default: the curated selection, 1 thread)")
    for name in RUN_OPTIONS[:3] + RUN_OPTIONS[4:]:  # --environments is above: with --commits it is a run option
        run.add_argument(f"--{name}", help=f"as `rnnbench run --{name}`")


def _sides(args: argparse.Namespace) -> tuple[list[dict], list[dict], bool, tuple[str, str]]:
    """(base records, new records, whether the environment is part of the row key, side labels)."""
    sides = [options.results_files([f for f in arg.split(",") if f]) for arg in args.files]  # BASE, NEW: FILE[,FILE]
    paths = [path for side in sides for path in side]
    if args.environments:  # without --commits: two sides of the files, not a run option
        names = [n.strip() for n in args.environments.split(",") if n.strip()]
        if len(names) != 2:
            raise InputError(f"--environments needs two names, BASE,NEW; got {args.environments!r}")
        if not paths:
            raise InputError(
                "--environments needs the results files holding both environments "
                "(`rnnbench run --environments ...` writes one)"
            )
        base, new = compare_inputs.split_by_environment(compare_inputs.load(paths), *names)
        return base, new, False, (names[0], names[1])
    if len(sides) != 2 or not all(sides):
        raise InputError(f"compare needs two sides, BASE NEW (got {len(sides)}), or --commits, or --environments")
    return compare_inputs.load(sides[0]), compare_inputs.load(sides[1]), True, (args.files[0], args.files[1])


def _run_commits(
    args: argparse.Namespace, run_commits: RunCommits
) -> tuple[list[dict], list[dict], bool, tuple[str, str]]:
    if args.files:
        raise InputError("--commits runs its own rows: give no files")
    if not 1 <= args.rounds <= 20:
        raise InputError(f"--rounds must be 1 to 20, got {args.rounds}")
    given: dict[str, str | bool] = {
        name: getattr(args, name) for name in RUN_OPTIONS if getattr(args, name) is not None
    }
    if args.profile:
        given["profile"] = True  # a flag of `rnnbench run`
    out_dir = Path(args.out_dir or time.strftime("results/compare-%Y%m%d-%H%M%S"))
    base_files, new_files, labels = run_commits(
        args.commits[0], args.commits[1], given, rounds=args.rounds, out_dir=out_dir
    )
    return compare_inputs.load(base_files), compare_inputs.load(new_files), True, labels


def run(args: argparse.Namespace, run_commits: RunCommits | None = None) -> int:
    """The command. run_commits: what runs --commits (default rnnbench.planning.commits.run_commits; tests
    pass a stand-in)."""
    given = (config_thresholds(args.config) if args.config else []) + list(args.threshold or [])
    (level, patterns), cut = thresholds(given), alpha(args.alpha)
    if not args.commits and any(getattr(args, name) is not None for name in RUN_OPTIONS if name != "environments"):
        raise InputError("run options (--models, --drivers, ...) go with --commits")
    try:
        base, new, with_env, labels = (
            _run_commits(args, run_commits or commits.run_commits) if args.commits else _sides(args)
        )
    except commits.RunFailed as exc:  # ours failed, not the user's input: exit 1
        print(terminal(f"rnnbench: error: {exc}"), file=sys.stderr)
        return 1
    try:
        result = compare(
            base,
            new,
            level,
            alpha=cut,
            across_machines=args.across_machines,
            normalize=args.normalize,
            with_environment=with_env,
            sides=labels,
            patterns=patterns,
            profile_all=args.profile,
        )
    except NothingMeasured as exc:  # a side without rows: said, and its own exit code
        print(terminal(f"rnnbench: {exc}"), file=sys.stderr)
        if args.format != "text":  # a CI step still gets its summary / comment body
            print(nothing_measured(str(exc), labels, args.format))
        return NOTHING_MEASURED
    print(render(result, args.format))
    return result.exit_code
