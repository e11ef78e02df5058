"""Runs jobs in worker processes, one worker per (environment, driver), with a per-row timeout.

A worker that crashes (segfault, OOM kill) or hangs costs one row, recorded as "crash" or
"timeout" with the last lines of its stderr; a new worker continues with the remaining rows.
Records are appended to the results file as they arrive, so a killed run can be resumed.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from rnnbench import record, registry
from rnnbench.run import environments
from rnnbench.run.row import Job, unavailable_reason
from rnnbench.status import Status

STDERR_TAIL_LINES = 20
WORKER_START_GRACE_S = 120.0  # importing torch/torch_xla on a loaded 2-core machine can take a minute


def _tail(path: Path) -> str:
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-STDERR_TAIL_LINES:])


def _exit_description(returncode: Optional[int]) -> str:
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode)
        hint = " (e.g. the kernel's out-of-memory killer)" if sig == signal.SIGKILL else ""
        return f"worker killed by signal {-returncode} ({sig.name}){hint}"
    return f"worker exited with code {returncode}"


def _memory_limiter(limit_gb: Optional[float]) -> Optional[Callable[[], None]]:
    if not limit_gb:
        return None
    limit = int(limit_gb * 2**30)
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class Runner:
    """Runs jobs with isolation. on_start(job) and on_record(record) report progress."""

    def __init__(
        self,
        out_path: Optional[Path],
        timeout_s: float,
        on_start: Callable[[Job], None] = lambda job: None,
        on_record: Callable[[dict], None] = lambda rec: None,
        memory_limit_gb: Optional[float] = None,
        extra_env: Optional[dict[str, str]] = None,
    ):
        """out_path: results file to append to (None: records are only reported). extra_env: added
        to each worker's environment (e.g. timing.cold_cache_env() for cold compile times)."""
        self.out_path = out_path
        self.timeout_s = timeout_s
        self.on_start = on_start
        self.on_record = on_record
        self.memory_limit_gb = memory_limit_gb
        self.extra_env = dict(extra_env or {})
        self.records: list[dict] = []

    def emit(self, rec: dict) -> None:
        if self.out_path is not None:
            record.append(self.out_path, rec)
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
        """Run `jobs` in `environment`'s interpreter, one worker at a time, a new one after each
        crash or timeout."""
        remaining = list(jobs)
        while remaining:
            done, failure = self._run_worker(environment, remaining)
            if failure is None:
                remaining = remaining[done:]
                continue
            index, status, report = failure
            self.emit({**remaining[index].identity(), "status": status, "report": report})
            remaining = remaining[index + 1 :]

    def _run_worker(self, environment: environments.Environment, jobs: list[Job]) -> tuple[int, Optional[tuple[int, str, str]]]:
        """One worker over `jobs`. Returns (rows completed, None) or (rows completed, (index of the
        failed row, status, report))."""
        fd, err_name = tempfile.mkstemp(suffix=".stderr")
        err_path = Path(err_name)
        try:
            with os.fdopen(fd, "w") as err_file:
                proc = subprocess.Popen(
                    [environment.python, "-m", "rnnbench.run.worker"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err_file,
                    text=True,
                    env={**os.environ, **environments.thread_env(jobs[0].threads), **environment.variables, **self.extra_env},
                    preexec_fn=_memory_limiter(self.memory_limit_gb),
                )
            proc.stdin.write(json.dumps([j.to_dict() for j in jobs]))
            proc.stdin.close()
            events: "queue.Queue[Optional[dict]]" = queue.Queue()

            def reader() -> None:
                for line in proc.stdout:
                    try:
                        events.put(json.loads(line))
                    except json.JSONDecodeError:
                        pass
                events.put(None)

            threading.Thread(target=reader, daemon=True).start()
            started: Optional[int] = None
            done = 0
            while True:
                wait = self.timeout_s if started is not None else self.timeout_s + WORKER_START_GRACE_S
                try:
                    event = events.get(timeout=wait)
                except queue.Empty:
                    proc.kill()
                    proc.wait()
                    why = f"no result within {wait:g} s; worker killed"
                    return done, (done if started is None else started, "timeout", f"{why}\n--- last stderr lines ---\n{_tail(err_path)}")
                if event is None:
                    proc.wait()
                    if done == len(jobs):
                        return done, None
                    why = _exit_description(proc.returncode)
                    return done, (done if started is None else started, "crash", f"{why}\n--- last stderr lines ---\n{_tail(err_path)}")
                if event["event"] == "start":
                    started = event["index"]
                    self.on_start(jobs[started])
                elif event["event"] == "record":
                    self.emit(event["record"])
                    done = event["index"] + 1
                    started = None
        finally:
            err_path.unlink(missing_ok=True)


def run_jobs(jobs: Iterable[Job], out_path: Path, timeout_s: float, on_record: Callable[[dict], None]) -> list[dict]:
    """Convenience wrapper: run jobs, report each record."""
    return Runner(out_path, timeout_s, on_record=on_record).run(jobs)
