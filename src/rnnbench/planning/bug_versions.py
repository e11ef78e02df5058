"""The rows of `rnnbench versions`: every probe of the bug x version table
(rnnbench.report.bug_table.probes) in every environment of the framework-version matrix that runs
its driver, as plain rows through the ordinary runner (`--no-time`)."""

from __future__ import annotations

from collections.abc import Iterable

from rnnbench import registry
from rnnbench.machine import environments
from rnnbench.rows.row import Job


def probe_jobs(probes: Iterable, environment_names: Iterable[str]) -> list[Job]:
    """Every probe (report.bug_table.Probe) in every named environment that runs its driver, each
    row once (probes of several bugs may share a row)."""
    probes = list(probes)
    jobs: dict[tuple, Job] = {}
    for env in environment_names:
        for probe in probes:
            if environments.runs(registry.get_driver(probe.driver), env):
                job = Job(
                    model=probe.model,
                    driver=probe.driver,
                    dtype=probe.dtype,
                    sizes=dict(probe.sizes),
                    time=False,
                    environment=env,
                    loss_form=probe.loss,
                    order=probe.order,
                )
                jobs.setdefault(job.key() + (job.order,), job)
    return list(jobs.values())
