"""Runs jobs in worker processes (rnnbench.processes.isolation), one worker per (environment, driver),
with a per-row timeout: a worker that crashes or hangs costs one row, recorded as "crash" or
"timeout"; a new worker continues with the remaining rows.
Records are appended to the results file as they arrive, so a killed run can be resumed.

One (environment, driver) group is one unit of work (GroupWork): the local runner runs the groups
one after another in this process's workers; with an executor (rnnbench.rows.executors, `--executor
ray`) each group runs the same way on a cluster node and its records come back to this process,
the one writer of the results file. A group whose environment rnnbench creates on demand and
that is missing where it runs (a Ray node) creates it there before its rows.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rnnbench import registry, results_file
from rnnbench.errors import InputError
from rnnbench.machine import env_create, environments
from rnnbench.processes.isolation import WORKER_START_GRACE_S, run_isolated
from rnnbench.rows.executors import ENVIRONMENT_CREATION_S, UNIT_GRACE_S, RayExecutor, Unit
from rnnbench.rows.pair import unavailable_reason
from rnnbench.rows.row import Job
from rnnbench.status import Status

# Variables for a group's workers: a mapping, or a function called where the group runs (compile
# cache directories are the running machine's: caches.warm_cache_env, caches.cold_cache_env).
ExtraEnv = Mapping[str, str] | Callable[[], Mapping[str, str]]


def _no_annotation(rec: dict) -> dict:
    return rec


@dataclass
class GroupWork:
    """One (environment, driver) group of rows, run the local way wherever it is called: one worker
    at a time in `environment`'s interpreter, a new one after each crash or timeout, which costs
    that row only. Plain data and module-level functions: it travels to a Ray node as it is."""

    environment: str
    jobs: list[Job]
    timeout_s: float
    memory_limit_gb: float | None = None
    extra_env: ExtraEnv = field(default_factory=dict)
    annotate: Callable[[dict], dict] = _no_annotation  # e.g. roofline.Roofline: made where the row ran

    def failed(self, job: Job, status: str, report: str) -> dict:
        return self.annotate({**job.identity(), "status": status, "report": report})

    def __call__(self, emit: Callable[[dict], None], on_start: Callable[[Job], None] = lambda job: None) -> None:
        jobs = self.jobs
        try:
            env = self.environment_here()
        except (InputError, RuntimeError, OSError) as exc:  # uv failed, no uv, disk full: no row can start
            for job in jobs:
                on_start(job)
                emit(
                    self.failed(
                        job,
                        Status.CRASH,
                        f"environment {self.environment!r} is missing on "
                        f"{socket.gethostname()} and creating it there failed: {exc}",
                    )
                )
            return
        extra = self.extra_env() if callable(self.extra_env) else self.extra_env
        run_isolated(
            [env.python, "-m", "rnnbench.rows.worker"],
            [j.to_dict() for j in jobs],
            self.timeout_s,
            on_start=lambda i: on_start(jobs[i]),
            on_result=lambda i, rec: emit(self.annotate(rec)),
            on_failure=lambda i, status, report: emit(self.failed(jobs[i], status, report)),
            env={**os.environ, **environments.thread_env(jobs[0].threads), **env.variables, **extra},
            memory_limit_gb=self.memory_limit_gb,
        )

    def environment_here(self) -> environments.Environment:
        """The group's environment on this machine. One that rnnbench creates on demand (in its
        cache) and that is missing here is created first: on a Ray node, which the parent's
        creation (on its own machine) did not reach. create() holds the environment's lock, so two
        units on one node never build it at once: the second waits, then finds it made."""
        env = environments.get(self.environment)
        if env.missing_reason() and env.on_demand:
            env = env_create.create(
                self.environment, log=lambda line: print(f"rnnbench: {line}", file=sys.stderr, flush=True)
            )
        return env

    def unit(self) -> Unit:
        """This group as a unit for an executor: the CPUs its rows' threads need, its own cores for
        timed rows, a GPU for cuda rows, and a deadline of its rows' timeouts plus a worker start."""
        first = self.jobs[0]
        return Unit(
            f"{first.driver} in {self.environment} ({len(self.jobs)} rows)",
            self,
            self.lost,
            cpus=first.threads,
            gpus=int(first.device == "cuda"),
            exclusive=first.time,
            deadline_s=len(self.jobs) * self.timeout_s
            + WORKER_START_GRACE_S
            + UNIT_GRACE_S
            + (ENVIRONMENT_CREATION_S if environments.get(self.environment).on_demand else 0.0),
        )

    def lost(self, status: str, report: str) -> list[dict]:
        """The records of this group's rows when the unit that ran them was lost."""
        return [self.failed(job, status, report) for job in self.jobs]


class Runner:
    """Runs jobs with isolation. on_start(job) and on_record(record) report progress."""

    def __init__(
        self,
        results: results_file.ResultsFile | None,
        timeout_s: float,
        *,
        on_start: Callable[[Job], None] = lambda job: None,
        on_record: Callable[[dict], None] = lambda rec: None,
        memory_limit_gb: float | None = None,
        extra_env: ExtraEnv | None = None,
        annotate: Callable[[dict], dict] = _no_annotation,
        executor: RayExecutor | None = None,
    ):
        """results: the open results file records are appended to (None: records are only
        reported). extra_env: added to each worker's environment (e.g. caches.cold_cache_env for
        cold compile times; a function is called where the group runs). annotate(record): what is
        added to each record before it is written (e.g. roofline.Roofline: the GEMM peak and the
        row's fraction of it), applied where the row ran. executor: where the groups run (None:
        here, one after another). Each worker pins itself to `threads` CPUs before any framework
        is imported (rnnbench.rows.worker.setup), so a row's threads are its cores."""
        self.results = results
        self.timeout_s = timeout_s
        self.on_start = on_start
        self.on_record = on_record
        self.memory_limit_gb = memory_limit_gb
        self.extra_env = extra_env if extra_env is not None else {}
        self.annotate = annotate
        self.executor = executor
        self.records: list[dict] = []

    def write(self, rec: dict) -> None:
        """Keep a finished record: append it to the results file, report it."""
        if self.results is not None:
            self.results.append(rec)
        self.records.append(rec)
        self.on_record(rec)

    def emit(self, rec: dict) -> None:
        self.write(self.annotate(rec))

    def group(self, environment: str, jobs: list[Job]) -> GroupWork:
        return GroupWork(
            environment,
            jobs=jobs,
            timeout_s=self.timeout_s,
            memory_limit_gb=self.memory_limit_gb,
            extra_env=self.extra_env,
            annotate=self.annotate,
        )

    def run(self, jobs: Iterable[Job]) -> list[dict]:
        """Run every job, grouped by (environment, driver) in first-seen order."""
        groups: dict[tuple[str, str], list[Job]] = {}
        for job in jobs:
            reason = unavailable_reason(registry.get_model(job.model), registry.get_driver(job.driver), **job.where())
            if reason is not None:  # decided here: no process needed to say so
                self.on_start(job)
                self.emit({**job.identity(), "status": Status.UNAVAILABLE, "reason": reason})
                continue
            groups.setdefault((job.environment, job.driver), []).append(job)
        work = [self.group(env_name, group) for (env_name, _driver), group in groups.items()]
        if self.executor is not None:
            self.executor.run([w.unit() for w in work], self.write)
        else:
            for w in work:
                w(self.write, self.on_start)
        return self.records
