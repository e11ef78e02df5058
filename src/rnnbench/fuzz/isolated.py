"""`rnnbench fuzz` with each driver in its own worker processes (rnnbench.processes.isolation, as rows
are run): a framework that segfaults, is killed or hangs on some body costs that (body, driver)
only, recorded as "crash" / "timeout"; a fresh worker continues with the next body. The parent
writes one record per outcome as it comes (rnnbench.fuzz.campaign.Campaign), so an interrupted
campaign keeps what it finished and `--resume` continues it.

`python -m rnnbench.fuzz.isolated` is the worker: it is sent body indices and returns, per body,
(outcome, None) or (None, why the body is ill-conditioned)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rnnbench import registry
from rnnbench.fuzz.campaign import Campaign, is_ill, shrunk_from_records
from rnnbench.fuzz.cases import build
from rnnbench.fuzz.outcome import Outcome
from rnnbench.fuzz.report import explain_failure
from rnnbench.fuzz.runner import explain
from rnnbench.fuzz.summary import FuzzSummary
from rnnbench.processes.isolation import WORKER_START_GRACE_S, run_isolated, serve
from rnnbench.processes.local_pool import LocalPool
from rnnbench.rows.executors import UNIT_GRACE_S, RayExecutor, Unit


@dataclass
class FuzzContext:
    """What a worker needs besides the body indices: the campaign and the driver it runs. shrunk
    counts the failures already shrunk per (driver, kind): a restarted worker continues from the
    parent's count, not from zero."""

    campaign: Campaign
    driver: str
    shrunk: Counter = field(default_factory=Counter)


def handle(context: FuzzContext, index: int) -> tuple[Outcome | None, str | None]:
    """One body on the context's driver in this worker."""
    campaign = context.campaign
    fc = build(campaign.body(index), dtype=campaign.dtype)
    if fc.ill_conditioned:
        return None, fc.ill_conditioned

    def on_failure(outcome, minimal, driver):
        explain_failure(
            outcome,
            minimal,
            driver,
            dtype=campaign.dtype,
            repro_dir=campaign.repro_dir,
            seed=campaign.seed,
            device=campaign.device,
        )

    return explain(
        campaign, index, fc, driver=registry.get_driver(context.driver), shrunk=context.shrunk, on_failure=on_failure
    ), None


@dataclass
class FuzzChunk:
    """Bodies `items` on the context's driver, each in a worker process (run_isolated; a fresh
    worker after a crash or hang), every outcome and ill-conditioned body made a record here
    (Campaign: where the bodies ran, with that machine). The unit of work of a fuzz campaign: the
    local campaign runs one chunk per driver, the Ray executor several per driver on its nodes."""

    context: FuzzContext
    items: list[int]

    def __call__(self, emit: Callable[[dict], None], progress: Callable[[str], None] | None = None) -> None:
        context, items, name = self.context, self.items, self.context.driver
        campaign = context.campaign

        def said(i: int) -> None:
            if progress is not None:
                progress(f"{name}: case {i + 1}/{campaign.judged}")

        def on_result(k: int, result: tuple) -> None:
            out, reason = result
            if out is None:
                emit(campaign.ill_record(items[k], reason))
            else:
                emit(campaign.to_record(out))
                if out.minimal is not None:  # a restarted worker must not shrink this kind again
                    context.shrunk[(name, out.kind)] += 1
            said(items[k])

        def on_failure(k: int, status: str, report: str) -> None:
            emit(self.failed(items[k], status, f"{status}: {report}"))
            said(items[k])

        run_isolated(
            [sys.executable, "-m", "rnnbench.fuzz.isolated"],
            items,
            campaign.timeout_s,
            on_result=on_result,
            on_failure=on_failure,
            context=lambda: context,
            env=dict(os.environ),
        )

    def failed(self, index: int, status: str, report: str) -> dict:
        campaign = self.context.campaign
        return campaign.to_record(Outcome(index, self.context.driver, status, report=report, body=campaign.body(index)))

    def unit(self) -> Unit:
        """This chunk as a unit: one CPU (Ray sets a task's OMP_NUM_THREADS to its CPUs, so the
        worker's framework uses one), a GPU on cuda, no cores of its own (correctness only), a
        deadline of its bodies' timeouts plus a worker start."""
        campaign = self.context.campaign
        return Unit(
            f"fuzz {len(self.items)} bodies on {self.context.driver}",
            self,
            self.lost,
            cpus=1,
            gpus=int(campaign.device == "cuda"),
            deadline_s=len(self.items) * campaign.timeout_s + WORKER_START_GRACE_S + UNIT_GRACE_S,
        )

    def lost(self, status: str, report: str) -> list[dict]:
        return [self.failed(i, status, f"{status}: {report}") for i in self.items]


CHUNK_MIN, CHUNK_MAX = 4, 32


def chunk_size(bodies: int, workers: int) -> int:
    """Bodies per fuzz chunk on Ray: about two chunks per worker (a slow chunk does not leave the
    others idle at the end), at least CHUNK_MIN (each chunk pays one worker start, seconds of
    framework import, against well under a second per eager body) and at most CHUNK_MAX (a lost
    chunk costs little, and records reach the file as chunks finish)."""
    return max(CHUNK_MIN, min(CHUNK_MAX, -(-bodies // (2 * max(1, workers)))))


def fuzz_isolated(
    campaign: Campaign,
    *,
    progress: Callable[[str], None] | None = None,
    write: Callable[[dict], None] | None = None,
    done: Sequence[dict] = (),
    executor: RayExecutor | None = None,
) -> FuzzSummary:
    """fuzz() with process isolation per driver (drivers run one after another, or with an executor
    in chunks at once: chunk_size). Every outcome and every ill-conditioned case becomes a record
    (Campaign), passed to write() in this process as it is decided (the parent is the one writer of
    the results file; an ill-conditioned case is written once, whichever driver found it). done:
    records of an earlier run of this campaign (rnnbench.fuzz.campaign.resume): their outcomes are
    not run again, an ill-conditioned case is skipped on every driver, kinds they shrank are not
    shrunk again (with an executor each chunk shrinks up to shrink_per_kind failures of a kind:
    chunks run at once and cannot share the count). The summary is rebuilt from done + the new
    records: the same as one uninterrupted run's. Without an executor, campaign.workers > 1 runs
    that many drivers at once here (rnnbench.processes.local_pool), each driver one chunk: one worker
    start and one compile cache per driver, as when they run one after another."""
    records = list(done)
    ill = {rec["case"] for rec in records if is_ill(rec)}
    finished = {(rec["case"], rec["driver"]) for rec in records if not is_ill(rec)}

    def keep(rec: dict) -> None:
        if is_ill(rec):
            if rec["case"] in ill:  # one record per case: later drivers skip it
                return
            ill.add(rec["case"])
        if write is not None:
            write(rec)
        records.append(rec)

    def chunk(name: str, items: list[int]) -> FuzzChunk:
        shrunk = shrunk_from_records(rec for rec in records if rec["driver"] == name)
        return FuzzChunk(FuzzContext(campaign, name, shrunk), items)

    def todo(name: str) -> list[int]:
        return [i for i in range(campaign.judged) if i not in ill and (i, name) not in finished]

    if executor is None and min(campaign.workers, len(campaign.drivers)) > 1:
        executor = LocalPool(campaign.workers)
    if executor is None:
        for name in campaign.drivers:
            items = todo(name)  # after the drivers before it: the cases they found ill are skipped
            if items:
                chunk(name, items)(keep, progress)
    else:
        _on_executor(executor, campaign, todo, chunk=chunk, keep=keep, progress=progress)
    return campaign.summary(records)


def _on_executor(
    executor: RayExecutor | LocalPool,
    campaign: Campaign,
    todo: Callable[[str], list[int]],
    *,
    chunk: Callable[[str, list[int]], FuzzChunk],
    keep: Callable[[dict], None],
    progress: Callable[[str], None] | None,
) -> None:
    """Every driver's cases still to do, in chunks sized for the executor's workers (on this
    machine, each driver's cases in one chunk), run at once."""
    total = sum(len(todo(name)) for name in campaign.drivers)
    size = max(1, total) if isinstance(executor, LocalPool) else chunk_size(total, executor.workers)
    units = [
        chunk(name, items[k : k + size]).unit()
        for name in campaign.drivers
        for items in [todo(name)]
        for k in range(0, len(items), size)
    ]

    def received(rec: dict) -> None:
        keep(rec)
        if progress is not None:
            progress(f"{rec['driver']}: case {rec['case'] + 1}/{campaign.judged}")

    executor.run(units, received)


if __name__ == "__main__":
    sys.exit(serve(handle))
