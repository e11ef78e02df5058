"""`rnnbench versions`: the bug x version table, every registered known issue and bug class probed
in every environment of the framework-version matrix (rnnbench.planning.bug_versions)."""

from __future__ import annotations

import argparse

from rnnbench import results_file
from rnnbench.cli import options
from rnnbench.machine import environments
from rnnbench.planning import plan
from rnnbench.processes import parent
from rnnbench.rows import executors

NAME = "versions"
HELP = (
    "the bug x version table: every registered known issue and bug class in every environment of the "
    "framework-version matrix"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.selection(
        p,
        environments="(default: every environment in src/rnnbench/environments.toml; missing ones are created)",
        resume="skip rows already recorded in --out",
    )
    options.timeout_option(p, 900.0)
    options.out_option(p, NAME)
    p.add_argument(
        "--from",
        dest="from_files",
        nargs="+",
        metavar="FILE",
        help="print the table of these results files instead of running",
    )
    options.executor_flags(p)


def run(args: argparse.Namespace) -> int:
    """Run the probes of rnnbench.report.bug_table in each environment (created where missing;
    rnnbench.planning.bug_versions), then print the bug x version table."""
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.planning import bug_versions
    from rnnbench.report import bug_table
    from rnnbench.report.progress import Progress
    from rnnbench.rows.runner import Runner

    if args.from_files:
        print(bug_table.format_table(results_file.load(options.results_files(args.from_files))))
        return 0
    timeout = options.number("--timeout", args.timeout, maximum=options.MAX_SECONDS)
    executors.check_executor(args.executor, args.address)
    envs = plan.names(args.environments, list(environments.environments()), "environment")
    jobs = bug_versions.probe_jobs(bug_table.probes(), envs)
    out = options.out_path(args.out, NAME, args.resume)
    options.create_named_environments(envs, {j.environment for j in jobs})
    with (
        executors.executor(args.executor if jobs else "local", args.address) as executor,
        results_file.ResultsFile(out, resume=args.resume) as results,
    ):
        parent.results_file(out, resumable=True)
        skipped, jobs = plan.not_yet_recorded(jobs, out, results) if args.resume else (0, jobs)
        print(
            f"rnnbench: {len(jobs)} rows in {len(envs)} environments -> {out}"
            + (f" ({skipped} already done, skipped)" if skipped else ""),
            flush=True,
        )
        progress = Progress(len(jobs))
        Runner(results, timeout, on_start=progress.start, on_record=progress.done, executor=executor).run(jobs)
        progress.close()
    print("\n" + bug_table.format_table(results_file.load([out])))
    return 0
