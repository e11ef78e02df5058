"""`rnnbench versions`: the bug x version table, every registered known issue and bug class probed
in every environment of the framework-version matrix (rnnbench.planning.bug_versions).

`rnnbench versions --bisect ID[,ID...]|all [--since VERSION] [--disk-budget GB] [--keep-environments]`: for
each registered issue named, the first release where it reproduces and the first where it no longer does,
over the releases the package index holds (rnnbench.planning.release_bisect), each probed release's
environment created from data and removed at the end (rnnbench.planning.release_probe); its rows go
to --out as `versions` writes them, and one line per issue says the range."""

from __future__ import annotations

import argparse
import time
from collections import OrderedDict

from rnnbench import results_file
from rnnbench.cli import options
from rnnbench.errors import InputError
from rnnbench.machine import environments
from rnnbench.planning import plan
from rnnbench.processes import parent
from rnnbench.rows import executors

NAME = "versions"
DISK_BUDGET_GB = 25.0
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
    bisect = p.add_argument_group("--bisect: the edges of registered issues over the releases the package index holds")
    bisect.add_argument(
        "--bisect",
        metavar="ID[,ID...]",
        help="known issues' ids (src/rnnbench/known_issues.json), or `all`: the first release where it reproduces "
        "and the first where it no longer does, creating an environment per probed release",
    )
    bisect.add_argument(
        "--since",
        metavar="VERSION",
        help="the oldest release the lower edge's search may probe (default: the oldest the matrix pins, "
        "src/rnnbench/environments.toml)",
    )
    bisect.add_argument(
        "--disk-budget",
        type=float,
        default=DISK_BUDGET_GB,
        metavar="GB",
        help=f"environments the bisect made may hold at once (default {DISK_BUDGET_GB:g}: four CUDA torch builds)",
    )
    bisect.add_argument(
        "--keep-environments", action="store_true", help="keep the environments the bisect made (default: remove)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the probes of rnnbench.report.bug_table in each environment (created where missing;
    rnnbench.planning.bug_versions), then print the bug x version table."""
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.planning import bug_versions
    from rnnbench.report import bug_table
    from rnnbench.report.progress import Progress
    from rnnbench.rows.runner import Runner

    if args.bisect:
        return _bisect(args)
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


def _since(package: str) -> str | None:
    """The oldest release of `package` an environment of the matrix pins (the lower search's floor)."""
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.planning import release_bisect, release_probe

    pinned = [v for e in environments.environments().values() if (v := release_probe._pinned(e, package))]
    return min(pinned, key=release_bisect.release_key, default=None)


def _bisect_plan(args: argparse.Namespace) -> list[tuple]:
    """(issue, package, held releases, measured releases, why it is not bisected or None) of every
    issue --bisect names; InputError for an unknown id, and for one named issue that cannot be bisected."""
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.check.bugs import known_issues
    from rnnbench.planning import release_bisect

    issues = {i.id: i for i in known_issues.registry()}
    wanted = list(issues) if args.bisect == "all" else [i.strip() for i in args.bisect.split(",")]
    for name in wanted:
        if name not in issues:
            raise InputError(f"--bisect: unknown issue {name!r} (the ids of src/rnnbench/known_issues.json, or all)")
    if args.from_files or args.resume:
        raise InputError("--bisect runs its own probes: give neither --from nor --resume")
    pythons = sorted({e.python_version for e in environments.environments().values() if e.python_version})
    held: dict[str, list[release_bisect.Release]] = {}
    planned = []
    for issue in [issues[name] for name in dict.fromkeys(wanted)]:
        package = next(iter(issue.versions), None)
        if package is not None and package not in held:
            held[package] = release_bisect.held_releases(package, pythons)
        releases = held.get(package or "", [])
        measured = release_bisect.measured_releases(issue, package or "", [r.version for r in releases])
        why = (
            "registers no framework version"
            if package is None
            else f"the package index holds no release of {package}"
            if not releases
            else f"no measured {package} release"
            if not measured
            else None
        )
        if why and args.bisect != "all":
            raise InputError(f"--bisect {issue.id}: {why}, nothing to bisect")
        planned.append((issue, package, releases, measured, why))
    return planned


def _bisect(args: argparse.Namespace) -> int:
    """`--bisect ID|all`: both edges of each issue, one line each (rnnbench.planning.release_bisect)."""
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.planning import release_bisect, release_probe
    from rnnbench.rows.runner import Runner

    planned = _bisect_plan(args)
    budget = options.number("--disk-budget", args.disk_budget) * 1e9
    timeout = options.number("--timeout", args.timeout, maximum=options.MAX_SECONDS)
    executors.check_executor(args.executor, args.address)
    out = options.out_path(args.out, NAME)
    made: OrderedDict[str, int] = OrderedDict()
    lines = []

    def log(line: str) -> None:
        print(f"rnnbench: {line}", flush=True)

    with (
        executors.executor(args.executor, args.address) as executor,
        results_file.ResultsFile(out, resume=False) as results,
    ):
        parent.results_file(out, resumable=False)
        runner = Runner(results, timeout, executor=executor)
        try:
            for issue, package, releases, measured, why in planned:
                start = time.perf_counter()
                if why:
                    lines.append(f"{issue.id}: {why}, not bisected")
                    print(lines[-1], flush=True)
                    continue
                probe = release_probe.ReleaseProbe(
                    issue=issue.id,
                    package=package,
                    releases={r.version: r for r in releases},
                    run_jobs=runner.run,
                    budget_bytes=int(budget),
                    made=made,
                    log=log,
                )
                result = release_bisect.edges(
                    issue.id,
                    package=package,
                    releases=[r.version for r in releases],
                    measured=measured,
                    probe=probe,
                    since=args.since or _since(package) or measured[0],
                )
                seconds = time.perf_counter() - start
                lines.append(release_bisect.format_line(result, seconds=seconds, peak_bytes=probe.peak_bytes))
                print(lines[-1], flush=True)
        finally:
            if not args.keep_environments:
                release_probe.remove_made(made, log=log)
    print(f"\nrows: {out}\n" + "\n".join(lines))
    return 0
