"""Command line: `rnnbench run` (the default comparison), `rnnbench list`, `rnnbench table`.

Exit codes: 0 every row ok, unavailable or a registered known issue (known_issue:<id>); 1 some row
failed its check or crashed, or a registered known issue no longer reproduces
(known_issue_fixed:<id>); 2 bad input (one line on stderr, no traceback)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from rnnbench import record, registry
from rnnbench.check.tolerance import tolerance
from rnnbench.report.table import failure_reports, format_table, summary
from rnnbench.run import environments
from rnnbench.run.row import Job
from rnnbench.run.timing import TimingConfig

DTYPES = ("float32", "float64", "bfloat16")
DEVICES = ("cpu", "cuda")


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + exits 2; we want one line
        raise UsageError(message)


def _names(value: Optional[str], known: Sequence[str], what: str) -> list[str]:
    if not value:
        return list(known)
    names = [v.strip() for v in value.split(",") if v.strip()]
    for n in names:
        if n not in known:
            raise UsageError(f"unknown {what} {n!r}; known: {', '.join(known)}")
    return names


def _sizes(value: Optional[str], models: list[str]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        key, sep, num = item.partition("=")
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
        sizes[key.strip()] = n
    return sizes


def _parser() -> _Parser:
    p = _Parser(prog="rnnbench", description=__doc__)
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="check gradients and time every model x driver (the default)")
    run.add_argument("--models", help="comma-separated model names (default: all)")
    run.add_argument("--drivers", help="comma-separated driver names (default: all)")
    run.add_argument("--environments", help="comma-separated environments, from main, xla (default: all; "
                     "a driver runs once in each of its environments)")
    run.add_argument("--dtypes", default="float32", help=f"comma-separated, from {', '.join(DTYPES)} (default float32)")
    run.add_argument("--device", default="cpu", help="cpu or cuda")
    run.add_argument("--sizes", help="overrides of model sizes, e.g. T=64,H=128")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="threads per framework")
    run.add_argument("--budget", type=float, default=0.5, help="seconds of repeats per timed quantity")
    run.add_argument("--timeout", type=float, default=600.0, help="seconds before a row is killed")
    run.add_argument("--no-time", action="store_true", help="check gradients only")
    run.add_argument("--out", help="results file (JSON Lines; default results/run-<timestamp>.jsonl)")
    sub.add_parser("list", help="models and drivers, with availability here")
    table = sub.add_parser("table", help="print the table of one or more results files")
    table.add_argument("files", nargs="+")
    return p


def _jobs(args) -> list[Job]:
    models = _names(args.models, list(registry.models()), "model")
    drivers = _names(args.drivers, list(registry.drivers()), "driver")
    envs = _names(args.environments, list(environments.environments()), "environment")
    dtypes = _names(args.dtypes, DTYPES, "dtype")
    if args.device not in DEVICES:
        raise UsageError(f"unknown device {args.device!r}; known: {', '.join(DEVICES)}")
    if args.threads <= 0 or args.budget <= 0 or args.timeout <= 0:
        raise UsageError("--threads, --budget and --timeout must be positive")
    for d in dtypes:
        tolerance(d, "analytic")
    sizes = _sizes(args.sizes, models)
    timing = TimingConfig(budget_s=args.budget)
    return [
        Job(m, d, dtype, args.device, sizes, args.seed, args.threads, timing, not args.no_time, env)
        for dtype in dtypes
        for m in models
        for d in drivers
        for env in registry.get_driver(d).environments
        if env in envs
    ]


def _out_path(value: Optional[str]) -> Path:
    path = Path(value) if value else Path("results") / time.strftime("run-%Y%m%d-%H%M%S.jsonl")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write results file {path}: {exc.strerror}") from None
    return path


def _cmd_run(args) -> int:
    from rnnbench.run.runner import run_jobs

    jobs = _jobs(args)
    out = _out_path(args.out)
    start = time.perf_counter()
    print(f"rnnbench: {len(jobs)} rows -> {out}", flush=True)

    def progress(rec: dict) -> None:
        err = rec.get("max_rel_error")
        err_s = "" if err is None else f" max rel err {err:.1e}"
        env = rec.get("env_label", rec.get("environment_name", ""))
        print(f"  {rec['model']:<18} {rec['driver']:<34} {env:<13} {rec['dtype']:<8} {rec['status']}{err_s}", flush=True)

    records = run_jobs(jobs, out, args.timeout, progress)
    print()
    print(format_table(records))
    reports = failure_reports(records)
    if reports:
        print("\n" + reports)
    print(f"\n{summary(records)} in {time.perf_counter() - start:.0f} s; records in {out}")
    return 1 if any(record.is_failing(r["status"]) for r in records) else 0


def _cmd_list(args) -> int:
    print("models:")
    for m in registry.models().values():
        sizes = ",".join(f"{k}={v}" for k, v in m.default_sizes.items())
        print(f"  {m.name:<18} {sizes:<22} oracle={m.oracle_kind:<13} {m.summary}")
    print("drivers:")
    for d in registry.drivers().values():
        reasons = []
        for name in d.environments:
            env = environments.environments().get(name)
            reason = env.missing_reason() if env else f"unknown environment {name}"
            if reason is None and name == environments.current():
                reason = d.available()
            if reason:
                reasons.append(f"{name}: {reason}")
        envs = ",".join(d.environments)
        print(f"  {d.name:<34} [{envs}] {d.summary}" + (f"  (unavailable: {'; '.join(reasons)})" if reasons else ""))
    return 0


def _cmd_table(args) -> int:
    paths = [Path(f) for f in args.files]
    for p in paths:
        if not p.is_file():
            raise UsageError(f"results file {p} does not exist")
    records = record.load(paths)
    print(format_table(records))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]
    try:
        args = _parser().parse_args(argv)
        command = {"run": _cmd_run, "list": _cmd_list, "table": _cmd_table}[args.command]
        return command(args)
    except (UsageError, registry.UnknownName, record.CorruptRecords, ValueError) as exc:
        print(f"rnnbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rnnbench: interrupted; records written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
