"""Worker process for rows (`python -m rnnbench.rows.worker`): runs the jobs it is sent, in order,
and returns each row's record (rnnbench.processes.isolation speaks the protocol). An error outside the
driver (a bad job) is still one record; a crash or hang is judged by the parent."""

from __future__ import annotations

import sys
import traceback
from typing import Any

from rnnbench import registry
from rnnbench.machine.cpus import choose_cpus, pin_process
from rnnbench.status import Status


def setup(context: Any, jobs: list[dict]) -> None:
    """Before any row: pin this worker to its CPUs, then fix each framework's threads (the group
    shares one thread count). `--threads N` means N cores: the worker's CPU affinity is N CPUs of
    the set it inherited from its parent (rnnbench.machine.cpus.choose_cpus, the same ones for every
    worker), set before any framework is imported, so pools sized from the affinity (XLA's,
    OpenMP's) are N wide and no pool can spread to other cores."""
    if not jobs:
        return
    threads = int(jobs[0].get("threads", 1))
    pin_process(choose_cpus(threads))

    frameworks = {
        registry.get_driver(j["driver"]).framework.name: registry.get_driver(j["driver"]).framework for j in jobs
    }
    for framework in frameworks.values():
        framework.set_threads(threads)


def handle(context: Any, spec: dict) -> dict:
    # lazy: the worker pins its CPUs (setup) before the row machinery, and any framework it reaches, loads
    from rnnbench.rows.row import Job, run_row

    try:
        return run_row(Job.from_dict(spec))
    except Exception as exc:  # an error outside the driver (bad job): still one record, keyed like any row's
        report = "".join(traceback.format_exception(exc)[-6:])
        try:
            return {**Job.from_dict(spec).identity(), "status": Status.ERROR, "report": report}
        except Exception:  # a job too malformed for an identity: its own fields, the environment by name
            fields = {k: v for k, v in spec.items() if k != "environment"}
            return {**fields, "environment_name": spec.get("environment"), "status": Status.ERROR, "report": report}


if __name__ == "__main__":
    from rnnbench.processes.isolation import serve

    sys.exit(serve(handle, setup))
