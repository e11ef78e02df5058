"""Runs jobs in worker processes (rnnbench.run.isolation), one worker per (environment, driver),
with a per-row timeout: a worker that crashes or hangs costs one row, recorded as "crash" or
"timeout"; a new worker continues with the remaining rows.
Records are appended to the results file as they arrive, so a killed run can be resumed.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Optional

from rnnbench import record, registry
from rnnbench.run import environments
from rnnbench.run.isolation import run_isolated
from rnnbench.run.row import Job, unavailable_reason
from rnnbench.status import Status

class Runner:
    """Runs jobs with isolation. on_start(job) and on_record(record) report progress."""

    def __init__(
        self,
        results: Optional[record.ResultsFile],
        timeout_s: float,
        on_start: Callable[[Job], None] = lambda job: None,
        on_record: Callable[[dict], None] = lambda rec: None,
        memory_limit_gb: Optional[float] = None,
        extra_env: Optional[dict[str, str]] = None,
        annotate: Callable[[dict], dict] = lambda rec: rec,
    ):
        """results: the open results file records are appended to (None: records are only
        reported). extra_env: added to each worker's environment (e.g. timing.cold_cache_env() for
        cold compile times). annotate(record): what the parent adds to each record before it is
        written (e.g. timing.with_roofline: the GEMM peak and the row's fraction of it).
        Each worker pins itself to `threads` CPUs before any framework is imported
        (rnnbench.run.worker.setup), so a row's threads are its cores."""
        self.results = results
        self.timeout_s = timeout_s
        self.on_start = on_start
        self.on_record = on_record
        self.memory_limit_gb = memory_limit_gb
        self.extra_env = dict(extra_env or {})
        self.annotate = annotate
        self.records: list[dict] = []

    def emit(self, rec: dict) -> None:
        rec = self.annotate(rec)
        if self.results is not None:
            self.results.append(rec)
        self.records.append(rec)
        self.on_record(rec)

    def run(self, jobs: Iterable[Job]) -> list[dict]:
        """Run every job, grouped by (environment, driver) in first-seen order."""
        groups: dict[tuple[str, str], list[Job]] = {}
        for job in jobs:
            reason = unavailable_reason(registry.get_model(job.model), registry.get_driver(job.driver), job)
            if reason is not None:  # decided here: no process needed to say so
                self.on_start(job)
                self.emit({**job.identity(), "status": Status.UNAVAILABLE, "reason": reason})
                continue
            groups.setdefault((job.environment, job.driver), []).append(job)
        for (env_name, _driver), group in groups.items():
            self.run_group(environments.get(env_name), group)
        return self.records

    def run_group(self, environment: environments.Environment, jobs: list[Job]) -> None:
        """Run `jobs` in `environment`'s interpreter (rnnbench.run.isolation): one worker at a
        time, a new one after each crash or timeout, which costs that row only."""
        run_isolated(
            [environment.python, "-m", "rnnbench.run.worker"],
            [j.to_dict() for j in jobs],
            self.timeout_s,
            on_start=lambda i: self.on_start(jobs[i]),
            on_result=lambda i, rec: self.emit(rec),
            on_failure=lambda i, status, report: self.emit({**jobs[i].identity(), "status": status, "report": report}),
            env={**os.environ, **environments.thread_env(jobs[0].threads), **environment.variables, **self.extra_env},
            memory_limit_gb=self.memory_limit_gb,
        )

