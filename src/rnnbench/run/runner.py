"""Runs jobs in worker processes, one worker per (environment, driver), with a per-row timeout.

A worker that crashes (segfault, OOM kill) or hangs costs one row, recorded as "crash" or
"timeout" with the last lines of its stderr; a new worker continues with the remaining rows.
Records are appended to the results file as they arrive."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from rnnbench import record, registry
from rnnbench.run import environments
from rnnbench.run.row import Job

STDERR_TAIL_LINES = 20


def _base_record(job: Job) -> dict[str, Any]:
    model = registry.get_model(job.model)
    driver = registry.get_driver(job.driver)
    return {
        "schema": record.SCHEMA,
        "model": job.model,
        "driver": job.driver,
        "framework": driver.framework,
        "environment_name": job.environment,
        "env_label": job.environment,  # the worker replaces it with its torch version
        "anchor": driver.anchor,
        "dtype": job.dtype,
        "device": job.device,
        "sizes": model.sizes_with_defaults(job.sizes),
        "seed": job.seed,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": record.machine(),
    }


def _tail(path: Path) -> str:
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-STDERR_TAIL_LINES:])


def _run_group(environment: environments.Environment, jobs: list[Job], timeout_s: float, emit: Callable[[dict], None]) -> None:
    python = environment.python
    remaining = list(jobs)
    while remaining:
        with tempfile.NamedTemporaryFile("w+", suffix=".stderr", delete=False) as err:
            err_path = Path(err.name)
        env = {**os.environ, **environments.thread_env(remaining[0].threads), **environment.variables}
        with open(err_path, "w") as err_file:
            proc = subprocess.Popen(
                [python, "-m", "rnnbench.run.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err_file,
                text=True,
                env=env,
            )
        proc.stdin.write(json.dumps([j.to_dict() for j in remaining]))
        proc.stdin.close()
        events: "queue.Queue[dict | None]" = queue.Queue()

        def reader() -> None:
            for line in proc.stdout:
                try:
                    events.put(json.loads(line))
                except json.JSONDecodeError:
                    pass
            events.put(None)

        threading.Thread(target=reader, daemon=True).start()
        started = None  # index into `remaining` of the row in progress
        done = 0
        failure = None
        while True:
            try:
                event = events.get(timeout=timeout_s if started is not None else timeout_s + 120)
            except queue.Empty:
                proc.kill()
                failure = ("timeout", f"no result within {timeout_s:g} s; worker killed")
                break
            if event is None:
                proc.wait()
                if started is not None:
                    failure = ("crash", f"worker exited with code {proc.returncode} during the row")
                break
            if event["event"] == "start":
                started = event["index"]
            elif event["event"] == "record":
                emit(event["record"])
                done = event["index"] + 1
                started = None
        proc.wait()
        if failure is None and done < len(remaining) and started is None:
            failure = ("crash", f"worker exited with code {proc.returncode} before starting a row")
            started = done
        if failure is not None:
            status, why = failure
            started = done if started is None else started
            rec = _base_record(remaining[started])
            rec.update(status=status, report=f"{why}\n--- last stderr lines ---\n{_tail(err_path)}")
            emit(rec)
            remaining = remaining[started + 1 :]
        else:
            remaining = remaining[done:]
        err_path.unlink(missing_ok=True)


def run_jobs(jobs: Iterable[Job], out_path: Path, timeout_s: float, on_record: Callable[[dict], None]) -> list[dict]:
    """Run every job, grouped by (environment, driver) in first-seen order; each job runs in the
    interpreter of its environment (job.environment), so one results file holds every environment's
    rows. Returns the records."""
    results: list[dict] = []

    def emit(rec: dict) -> None:
        record.append(out_path, rec)
        results.append(rec)
        on_record(rec)

    groups: dict[tuple[str, str], list[Job]] = {}
    for job in jobs:
        driver = registry.get_driver(job.driver)
        reason = driver.supports(registry.get_model(job.model))
        if reason is None and job.environment not in driver.environments:
            reason = f"{job.driver} does not run in environment '{job.environment}'"
        env = environments.get(job.environment)
        reason = reason or env.missing_reason()
        if reason is not None:  # decided here: no process needed to say so
            emit({**_base_record(job), "status": "unavailable", "reason": reason})
            continue
        groups.setdefault((job.environment, job.driver), []).append(job)
    for (env_name, _driver), group in groups.items():
        _run_group(environments.get(env_name), group, timeout_s, emit)
    return results
