"""`rnnbench sweep`: time models x drivers over sequence lengths and hidden sizes, each row cold
(rnnbench.rows.sweep)."""

from __future__ import annotations

import argparse
import time

from rnnbench import registry, results_file
from rnnbench.cli import options
from rnnbench.model import DTYPES
from rnnbench.planning import plan
from rnnbench.processes import parent
from rnnbench.report.table import summary
from rnnbench.rows import executors
from rnnbench.rows.timing import TimingConfig
from rnnbench.status import is_failing

NAME = "sweep"
HELP = "time models x drivers over sequence lengths and hidden sizes, each row cold"


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.selection(
        p,
        models=("lstm,rnn", "(default lstm,rnn)"),
        drivers="(default: all)",
        dtypes=("float32", f"(from {', '.join(DTYPES)}; swept one after another; default float32)"),
    )
    p.add_argument("--lengths", default="16,32,64,128,256", help="trip counts (T or K), comma-separated")
    p.add_argument("--hidden", default="", help="widths (H or n) at the base length, comma-separated")
    p.add_argument("--sizes", help="base sizes for every row, e.g. B=16,I=64,H=128")
    p.add_argument("--threads", type=int, default=options.CORES, help="threads per framework")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of repeats per timed quantity")
    p.add_argument("--driver-budget", type=float, default=120.0, help="wall seconds per (model, driver) over the sweep")
    options.timeout_option(p, 600.0)
    options.out_option(p, NAME)
    options.executor_flags(p)


def int_list(value: str, what: str) -> list[int]:
    """Comma-separated positive integers (empty items skipped)."""
    return [plan.positive_int(item.strip(), f"{what} value ") for item in value.split(",") if item.strip()]


def _progress(rec: dict) -> None:
    t = rec.get("fwd_bwd")
    extra = f" fwd+bwd {t['median_ms']:.3g} ms" if t and rec["status"] == "ok" else f" {rec.get('reason', '')}"
    sizes = ",".join(f"{k}={v}" for k, v in rec["sizes"].items())
    print(f"  {rec['model']:<10} {rec['driver']:<20} {sizes:<22} {rec['status']}{extra}", flush=True)


def run(args: argparse.Namespace) -> int:
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.rows.sweep import SweepPlan, run_sweep

    models = plan.names(args.models, list(registry.models()), "model")
    drivers = plan.names(args.drivers, list(registry.drivers()), "driver")
    dtypes = plan.names(args.dtypes, DTYPES, "dtype", required=True)
    options.number("--threads", args.threads, **options.LIMITS["threads"])
    for flag in ("budget", "driver_budget", "timeout"):
        options.number("--" + flag.replace("_", "-"), getattr(args, flag), maximum=options.MAX_SECONDS)
    lengths, hidden = int_list(args.lengths, "--lengths"), int_list(args.hidden, "--hidden")
    executors.check_executor(args.executor, args.address)
    if not lengths and not hidden:
        raise options.UsageError("nothing to sweep: give --lengths and/or --hidden")
    plans = [
        SweepPlan(
            models=models,
            drivers=drivers,
            lengths=lengths,
            hidden=hidden,
            base_sizes=plan.used_sizes(plan.parse_sizes(args.sizes), models),
            dtype=dtype,
            threads=args.threads,
            timing=TimingConfig(budget_s=args.budget),
            driver_budget_s=args.driver_budget,
            row_timeout_s=args.timeout,
        )
        for dtype in dtypes
    ]
    out = options.out_path(args.out, NAME)
    start = time.perf_counter()
    with executors.executor(args.executor, args.address) as executor, results_file.ResultsFile(out) as results:
        parent.results_file(out, resumable=False)
        print(f"rnnbench: sweep -> {out}", flush=True)
        records = [rec for p in plans for rec in run_sweep(p, results, _progress, executor)]
    print(f"\n{summary(records)} in {time.perf_counter() - start:.0f} s; records in {out}")
    return 1 if any(is_failing(r["status"]) for r in records) else 0
