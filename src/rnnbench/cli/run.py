"""`rnnbench run`: check gradients and time every selected model x driver row (the default command)."""

from __future__ import annotations

import argparse
import time

from rnnbench import losses, record, registry, results_file
from rnnbench import modes as differentiation_modes
from rnnbench.cli import options
from rnnbench.machine import accelerator
from rnnbench.machine.cpus import load_line
from rnnbench.model import DTYPES
from rnnbench.planning import plan
from rnnbench.planning.settings import CONFIG_KEYS, RunSettings
from rnnbench.processes import parent
from rnnbench.report.table import failure_reports, format_table, summary
from rnnbench.rows import executors
from rnnbench.status import is_failing
from rnnbench.suites import SUITES

NAME = "run"
HELP = "check gradients and time every model x driver (the default)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML file with any of: " + ", ".join(CONFIG_KEYS))
    p.add_argument(
        "--suite",
        help="; ".join(f"{s.name}{' (default)' * (s.name == RunSettings.suite)}: {s.summary}" for s in SUITES.values())
        + "; --models / --drivers / --environments override it on their axis",
    )
    options.selection(
        p,
        models="(default: those of --suite)",
        drivers="(default: those of --suite)",
        environments="(`rnnbench env list`; default: those of --suite, each driver once in each of its "
        "environments); a framework-version environment runs every driver of its framework and is created on "
        "first use",
        dtypes=f"(from {', '.join(DTYPES)}; default float32)",
        losses=f"(from {', '.join(losses.NAMES)}; default: model, each model's own loss); every row runs under each",
        resume="skip rows already recorded in --out",
    )
    p.add_argument("--device", help="cpu (default) or cuda")
    p.add_argument("--sizes", help="overrides of model sizes, e.g. T=64,H=128")
    p.add_argument(
        "--seed",
        type=int,
        help="seed of every row's inputs and parameters (default 0; the same seed, the same numbers)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="threads per framework, at most the cores this process may use (default 1: rows never contend with "
        "themselves, and one-thread rows are compared on their CPU time)",
    )
    p.add_argument("--budget", type=float, help="seconds of repeats per timed quantity (default 0.5)")
    options.timeout_option(p, RunSettings.timeout, configurable=True)
    p.add_argument(
        "--compile-budget",
        dest="compile_budget",
        type=float,
        help="seconds a row's first call (compile) may take before the row is a timeout (default: none)",
    )
    p.add_argument("--memory-limit-gb", dest="memory_limit_gb", type=float, help="address-space limit per worker")
    p.add_argument(
        "--order",
        help="1, 2 (also check Hessian-vector products, float64 rows), or auto "
        "(default: 2 on float64 rows of core models)",
    )
    p.add_argument(
        "--modes",
        help="differentiation modes, comma-separated or all: "
        + ", ".join(differentiation_modes.MODES)
        + " (default: vjp,hvp; a row per first-order mode, H v inside the vjp rows; each row's own road is timed)",
    )
    p.add_argument(
        "--roads",
        action="store_true",
        help="each timed row also times, interleaved with its own, the other roads to its derivatives once they "
        "agree with its checked values: jvp beside vjp and vjp beside jvp / func; vjp, a loop over the examples "
        "and the batched-loss trick beside per_example (docs/measuring.md#speed-by-road)",
    )
    p.add_argument("--no-time", action="store_true", help="check gradients only")
    p.add_argument(
        "--profile",
        action="store_true",
        help="after timing each row, profile its forward+backward in a pass of its own (never inside a timed "
        "sample): the op table (torch), the compiled program's cost (jax) and Python's; `compare` shows what "
        "changed most (docs/ci.md#where-the-time-went)",
    )
    p.add_argument("--shard", help="run only shard I of N of the row matrix, e.g. 2/4 (deterministic)")
    options.out_option(p, NAME)
    options.executor_flags(p)


def run(args: argparse.Namespace) -> int:
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.machine.caches import warm_cache_env
    from rnnbench.machine.ceilings import Ceilings
    from rnnbench.machine.device_peak import roofline_for
    from rnnbench.report.progress import Progress
    from rnnbench.rows.runner import Runner

    s = options.settings(args)
    executors.check_executor(args.executor, args.address)
    selected = plan.jobs(s)
    out = options.out_path(args.out, NAME, args.resume)
    options.create_named_environments(s.environments, {j.environment for j in selected})
    # The executor first: a cluster that cannot be reached leaves no results file behind.
    with (
        executors.executor(args.executor if selected else "local", args.address) as executor,
        results_file.ResultsFile(out, resume=args.resume) as results,
    ):
        parent.results_file(out, resumable=True)  # an interruption says what is kept and how to continue
        skipped, selected = plan.not_yet_recorded(selected, out, results) if args.resume else (0, selected)
        start = time.perf_counter()
        print(
            f"rnnbench: {len(selected)} rows -> {out}" + (f" ({skipped} already done, skipped)" if skipped else ""),
            flush=True,
        )
        # read before this run adds its own load
        load = load_line(s.threads) if s.device == "cpu" else accelerator.load_line()
        print(f"rnnbench: {load}", flush=True)
        # The GEMM peak, once per machine and dtype, at the rows' threads and CPUs (cached per machine):
        # every timed row gets GFLOP/s and its fraction of it (on a Ray node, that node's peak).
        timed = (
            {}
            if not s.timed
            else {
                dtype: [registry.get_model(j.model).sizes_with_defaults(j.sizes) for j in selected if j.dtype == dtype]
                for dtype in sorted({j.dtype for j in selected})
            }
        )
        # and the memory and dispatch ceilings beside it: every timed row gets its binding ceiling
        roofline = Ceilings(roofline_for(s.device, s.threads, timed), s.device, s.threads)
        if timed:
            roofline.measure(warn=lambda message: print(message, flush=True))
        progress = Progress(len(selected), unavailable=plan.unavailable_here(selected))
        # Compile caches persist across runs (caches.warm_cache_env, called where the rows run): a
        # repeated run recompiles nothing it compiled before; `sweep` and the idiomatic comparison
        # time cold first calls instead.
        runner = Runner(
            results,
            s.timeout,
            on_start=progress.start,
            on_record=progress.done,
            memory_limit_gb=s.memory_limit_gb,
            extra_env=warm_cache_env,
            annotate=roofline,
            executor=executor,
        )
        for stage in plan.stages(s, selected):  # gpu: one stage at a time, cheap sizes first
            runner.run(stage)
        records = runner.records
        progress.close()
        if args.resume:
            records = record.latest_per_row(results.existing + records)
    print()
    _print_results(records)
    print(f"\n{summary(records)} in {time.perf_counter() - start:.0f} s; {load}; records in {out}")
    return 1 if any(is_failing(r["status"]) for r in records) else 0


def _print_results(records: list[dict]) -> None:
    """The table, the failures' reports, and a warning where a row beat the GEMM peak."""
    print(format_table(records))
    reports = failure_reports(records)
    if reports:
        print("\n" + reports)
    above = [r for r in records if any(q["fraction_of_peak"] > 1.0 for q in (r.get("roofline") or {}).values())]
    if above:  # the peak is meant to be a ceiling: a row above it means the peak missed a faster GEMM
        print(
            f"rnnbench: {len(above)} row(s) above the GEMM peak (e.g. {above[0]['model']}/{above[0]['driver']}): "
            "the peak measurement missed a faster GEMM; the % peak column is not a ceiling in this run"
        )
