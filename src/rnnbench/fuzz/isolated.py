"""`rnnbench fuzz` with each driver in its own worker processes (rnnbench.run.isolation, as rows
are run): a framework that segfaults, is killed or hangs on some body costs that (body, driver)
only, recorded as "crash" / "timeout"; a fresh worker continues with the next body. The parent
writes one record per outcome as it comes (rnnbench.fuzz.runner.Campaign), so an interrupted
campaign keeps what it finished and `--resume` continues it.

`python -m rnnbench.fuzz.isolated` is the worker: it is sent body indices and returns, per body,
(outcome, None) or (None, why the body is ill-conditioned)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from rnnbench.fuzz.grammar import judged_body
from rnnbench.fuzz.runner import Campaign, FuzzSummary, Outcome, fuzz_settings, is_ill, shrunk_from_records


@dataclass
class FuzzContext:
    """What a worker needs besides the body indices. shrunk counts the failures already shrunk per
    (driver, kind): a restarted worker continues from the parent's count, not from zero."""

    driver: str
    seed: int
    dtype: str
    second_order: bool
    shrink_per_kind: int
    repro_dir: Optional[str]
    device: str
    losses: tuple[str, ...] = ("weighted",)
    shrunk: Counter = field(default_factory=Counter)


def handle(context: FuzzContext, index: int) -> tuple[Optional[Outcome], Optional[str]]:
    """One body on the context's driver in this worker."""
    from rnnbench import registry
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.report import explain_failure
    from rnnbench.fuzz.runner import explain_outcome

    fc = build(judged_body(context.seed, index, context.losses), dtype=context.dtype)
    if fc.ill_conditioned:
        return None, fc.ill_conditioned
    repro_dir = Path(context.repro_dir) if context.repro_dir else None

    def on_failure(outcome, minimal, driver):
        explain_failure(outcome, minimal, driver, context.dtype, repro_dir, context.seed, context.device)

    out = explain_outcome(index, fc, registry.get_driver(context.driver), context.dtype, context.second_order,
                          context.shrink_per_kind, context.shrunk, on_failure, context.device)
    return out, None


def fuzz_isolated(cases: int, seed: int, driver_names: list[str], dtype: str = "float64", second_order: bool = True,
                  shrink_per_kind: int = 1, repro_dir: Optional[Path] = None, timeout_s: float = 300.0,
                  progress: Optional[Callable[[str], None]] = None, device: str = "cpu",
                  losses: Sequence[str] = ("weighted",), write: Optional[Callable[[dict], None]] = None,
                  done: Sequence[dict] = ()) -> FuzzSummary:
    """fuzz() with process isolation per driver (drivers run one after another). Every outcome and
    every ill-conditioned case becomes a record (Campaign), passed to write() in this process as it
    is decided (the parent is the one writer of the results file). done: records of an earlier run
    of this campaign (rnnbench.fuzz.runner.resume): their outcomes are not run again, an
    ill-conditioned case is skipped on every driver, kinds they shrank are not shrunk again. The
    summary is rebuilt from done + the new records: the same as one uninterrupted run's."""
    losses = tuple(losses)
    from rnnbench.run.isolation import run_isolated

    campaign = Campaign(cases, seed, list(driver_names), dtype, device, losses,
                        fuzz_settings(seed, second_order, shrink_per_kind, device, losses, timeout_s))
    records = list(done)
    ill = {rec["case"] for rec in records if is_ill(rec)}
    finished = {(rec["case"], rec["driver"]) for rec in records if not is_ill(rec)}
    judged = campaign.judged

    def keep(rec: dict) -> None:
        if write is not None:
            write(rec)
        records.append(rec)

    for name in driver_names:
        items = [i for i in range(judged) if i not in ill and (i, name) not in finished]
        if not items:
            continue
        context = FuzzContext(name, seed, dtype, second_order, shrink_per_kind,
                              str(repro_dir) if repro_dir else None, device, losses,
                              shrunk_from_records(rec for rec in records if rec["driver"] == name))

        def on_result(k: int, result: tuple, name: str = name, context: FuzzContext = context,
                      items: list[int] = items) -> None:
            i = items[k]
            out, reason = result
            if out is None:
                if i not in ill:  # one record per case: later drivers skip it
                    ill.add(i)
                    keep(campaign.ill_record(i, reason))
            else:
                keep(campaign.to_record(out))
                if out.minimal is not None:  # a restarted worker must not shrink this kind again
                    context.shrunk[(name, out.kind)] += 1
            if progress is not None:
                progress(f"{name}: case {i + 1}/{judged}")

        def on_failure(k: int, status: str, report: str, name: str = name, items: list[int] = items) -> None:
            i = items[k]
            keep(campaign.to_record(Outcome(i, name, status, report=f"{status}: {report}", body=campaign.body(i))))
            if progress is not None:
                progress(f"{name}: case {i + 1}/{judged}")

        run_isolated([sys.executable, "-m", "rnnbench.fuzz.isolated"], items, timeout_s,
                     on_result=on_result, on_failure=on_failure, context=lambda context=context: context,
                     env=dict(os.environ))
    return campaign.summary(records)


if __name__ == "__main__":
    from rnnbench.run.isolation import serve

    sys.exit(serve(handle))
