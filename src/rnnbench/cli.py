"""Command line: `rnnbench run` (the default comparison), `rnnbench list`, `rnnbench table`,
`rnnbench sweep` (sizes, cold rows, time budgets), `rnnbench report` (charts + HTML from records).

Exit codes: 0 every row ok or unavailable; 1 some row failed its check or crashed; 2 bad input
(one line on stderr, no traceback)."""

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
    sweep = sub.add_parser("sweep", help="time models x drivers over sequence lengths and hidden sizes, each row cold")
    sweep.add_argument("--models", default="lstm,rnn", help="comma-separated model names (default lstm,rnn)")
    sweep.add_argument("--drivers", help="comma-separated driver names (default: all)")
    sweep.add_argument("--lengths", default="16,32,64,128,256", help="trip counts (T or K), comma-separated")
    sweep.add_argument("--hidden", default="", help="widths (H or n) at the base length, comma-separated")
    sweep.add_argument("--sizes", help="base sizes for every row, e.g. B=16,I=64,H=128")
    sweep.add_argument("--dtype", default="float32", help=f"one of {', '.join(DTYPES)}")
    sweep.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="threads per framework")
    sweep.add_argument("--budget", type=float, default=0.5, help="seconds of repeats per timed quantity")
    sweep.add_argument("--driver-budget", type=float, default=120.0, help="wall seconds per (model, driver) over the sweep")
    sweep.add_argument("--timeout", type=float, default=600.0, help="seconds before any one row is killed")
    sweep.add_argument("--out", help="results file (JSON Lines; default results/sweep-<timestamp>.jsonl)")
    report = sub.add_parser("report", help="charts (PNG) and an HTML page from results files")
    report.add_argument("files", nargs="+")
    report.add_argument("--out-dir", default="results/report", help="where to write the PNGs and index.html")
    return p


def _jobs(args) -> list[Job]:
    models = _names(args.models, list(registry.models()), "model")
    drivers = _names(args.drivers, list(registry.drivers()), "driver")
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
        Job(m, d, dtype, args.device, sizes, args.seed, args.threads, timing, not args.no_time)
        for dtype in dtypes
        for m in models
        for d in drivers
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
        print(f"  {rec['model']:<18} {rec['driver']:<20} {rec['dtype']:<8} {rec['status']}{err_s}", flush=True)

    records = run_jobs(jobs, out, args.timeout, progress)
    print()
    print(format_table(records))
    reports = failure_reports(records)
    if reports:
        print("\n" + reports)
    print(f"\n{summary(records)} in {time.perf_counter() - start:.0f} s; records in {out}")
    return 1 if any(r["status"] in record.FAILING for r in records) else 0


def _cmd_list(args) -> int:
    from rnnbench.run import environments

    print("models:")
    for m in registry.models().values():
        sizes = ",".join(f"{k}={v}" for k, v in m.default_sizes.items())
        print(f"  {m.name:<18} {sizes:<22} oracle={m.oracle_kind:<13} {m.summary}")
    print("drivers:")
    for d in registry.drivers().values():
        env = environments.environments().get(d.environment)
        reason = env.missing_reason() if env else f"unknown environment {d.environment}"
        if reason is None and d.environment == "main":
            reason = d.available()
        print(f"  {d.name:<20} [{d.environment}] {d.summary}" + (f"  (unavailable: {reason})" if reason else ""))
    return 0


def _cmd_table(args) -> int:
    paths = [Path(f) for f in args.files]
    for p in paths:
        if not p.is_file():
            raise UsageError(f"results file {p} does not exist")
    records = record.load(paths)
    print(format_table(records))
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
    if args.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {args.dtype!r}; known: {', '.join(DTYPES)}")
    dtype = args.dtype
    if min(args.threads, args.budget, args.driver_budget, args.timeout) <= 0:
        raise UsageError("--threads, --budget, --driver-budget and --timeout must be positive")
    lengths, hidden = _int_list(args.lengths, "--lengths"), _int_list(args.hidden, "--hidden")
    if not lengths and not hidden:
        raise UsageError("nothing to sweep: give --lengths and/or --hidden")
    plan = SweepPlan(models, drivers, lengths, hidden, _sizes(args.sizes, models), dtype, args.threads,
                     TimingConfig(budget_s=args.budget), args.driver_budget, args.timeout)
    out = _out_path(args.out or str(Path("results") / time.strftime("sweep-%Y%m%d-%H%M%S.jsonl")))
    start = time.perf_counter()
    print(f"rnnbench: sweep -> {out}", flush=True)

    def progress(rec: dict) -> None:
        t = rec.get("fwd_bwd")
        extra = f" fwd+bwd {t['median_ms']:.3g} ms" if t and rec["status"] == "ok" else f" {rec.get('reason', '')}"
        sizes = ",".join(f"{k}={v}" for k, v in rec["sizes"].items())
        print(f"  {rec['model']:<10} {rec['driver']:<20} {sizes:<22} {rec['status']}{extra}", flush=True)

    records = run_sweep(plan, out, progress)
    print(f"\n{summary(records)} in {time.perf_counter() - start:.0f} s; records in {out}")
    return 1 if any(r["status"] in record.FAILING for r in records) else 0


def _cmd_report(args) -> int:
    paths = [Path(f) for f in args.files]
    for p in paths:
        if not p.is_file():
            raise UsageError(f"results file {p} does not exist")
    records = record.load(paths)
    if not records:
        raise UsageError("no records in the given files")
    from rnnbench.report.html import write_report

    out_dir = Path(args.out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out_dir}: {exc.strerror}") from None
    page = write_report(records, out_dir)
    print(f"rnnbench: report -> {page}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]
    try:
        args = _parser().parse_args(argv)
        command = {"run": _cmd_run, "list": _cmd_list, "table": _cmd_table, "sweep": _cmd_sweep, "report": _cmd_report}[args.command]
        return command(args)
    except (UsageError, registry.UnknownName, record.CorruptRecords, ValueError) as exc:
        print(f"rnnbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rnnbench: interrupted; records written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
