"""CPUs: which cores a row runs on (choose_cpus, claimed_cpus, pin_process), and what it used of
them (cpu_clock, cpu_record, contention_notes, load_line).

`--threads N` means N cores for every framework. Each worker is pinned by CPU affinity to N CPUs of
its parent's allowed set (`choose_cpus`, `pin_process`) before any framework is imported, so XLA's
and torch's own pools (sized from the affinity) cannot spread further; environment variables
(runner) and Framework.set_threads (worker) fix the frameworks' own counts on top. Each row records
its CPU list, the process CPU time / wall time over its timed loops, the load average at its start
and end, and notes when it used more than its share (`over_share`) or was timed while other work
left it less than its share (`load`, `contended`): `cpu_record`.

Standard library only: a worker pins its CPUs through this module before any heavy import.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OVER_SHARE = 1.1  # a row whose CPU time / wall exceeds threads * this used more cores than it was given
CONTENDED_CPUS = 0.1  # other work on the row's CPUs above this many CPUs' worth: its times are not its own
MIN_OTHERS_WALL_S = 0.5  # /proc/stat counts 10 ms ticks: other work is measured over timed loops at least this long
NOTES = {
    "over_share": f"CPU time / wall over the timed loops above threads x {OVER_SHARE:g}: "
    "it used more cores than --threads",
    "load": "other work on the machine while the row was timed exceeded the cores the row left free",
    "contended": f"other work used more than {CONTENDED_CPUS:g} of the row's CPUs while it was timed",
}


def _core_of(cpu: int) -> tuple[int, int]:
    """(package, core) of a logical CPU, from sysfs; (0, cpu) where the topology is not readable."""
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    try:
        return int((base / "physical_package_id").read_text()), int((base / "core_id").read_text())
    except (OSError, ValueError):
        return 0, cpu


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on (all of os.cpu_count() where affinity is not supported)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


CPUS_VAR = "RNNBENCH_CPUS"  # "2,3": CPUs claimed for this process's rows (claimed_cpus); choose_cpus takes them


def assigned_cpus() -> list[int] | None:
    """The CPUs named in $RNNBENCH_CPUS that this process may run on (a claim made by the Ray
    executor for the rows of one task: claimed_cpus), or None where it is unset or names none."""
    value = os.environ.get(CPUS_VAR, "")
    try:
        named = {int(c) for c in value.split(",") if c.strip()}
    except ValueError:
        return None
    return sorted(named & set(allowed_cpus())) or None


def cpu_order(pool: Iterable[int]) -> list[int]:
    """`pool` in the order CPUs are given out: one hardware thread per physical core first (two SMT
    siblings share one core's units: they are not two cores), cores taken from the highest-numbered
    CPU down, so CPU 0, where the kernel tends to run its housekeeping, comes last; siblings after."""
    first, siblings, seen = [], [], set()
    for cpu in sorted(set(pool), reverse=True):
        core = _core_of(cpu)
        (siblings if core in seen else first).append(cpu)
        seen.add(core)
    return first + siblings


def choose_cpus(threads: int, allowed: Iterable[int] | None = None) -> list[int]:
    """The CPUs a worker with `threads` threads is pinned to: the first `threads` of `allowed` in
    cpu_order (default: the CPUs claimed for this process in $RNNBENCH_CPUS, else this process's
    affinity, which a worker inherits from its parent), the same ones every time. All of `allowed`
    when threads is at least its size."""
    pool = sorted(set((assigned_cpus() or allowed_cpus()) if allowed is None else allowed))
    if threads >= len(pool):
        return pool
    return sorted(cpu_order(pool)[: max(1, threads)])


CLAIM_POLL_S = 0.1


@contextlib.contextmanager
def claimed_cpus(count: int, wait: bool = True) -> Iterator[list[int] | None]:
    """Claim `count` CPUs of this process's affinity for the block, so that concurrent claimers on
    this machine (two Ray tasks on one node) get distinct cores: one lock file per CPU in a
    directory per machine and user, held with flock (the kernel releases a dead holder's claim).
    CPUs are taken in cpu_order. Yields the claimed CPUs (sorted); with wait=False, None at once
    when `count` are not free (the caller then shares CPUs), else it waits for them."""
    pool = cpu_order(allowed_cpus())
    count = max(1, min(count, len(pool)))
    folder = Path(tempfile.gettempdir()) / f"rnnbench-cpu-claims-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    held: list[tuple[int, int]] = []
    try:
        while True:
            for cpu in pool:
                fd = os.open(folder / f"cpu{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                held.append((cpu, fd))
                if len(held) == count:
                    break
            if len(held) == count:
                break
            for _, fd in held:  # not enough free: hold none while waiting (no two claimers deadlock)
                os.close(fd)
            held = []
            if not wait:
                break
            time.sleep(CLAIM_POLL_S)
        yield sorted(cpu for cpu, _ in held) if held else None
    finally:
        for _, fd in held:
            os.close(fd)


def pin_process(cpus: Iterable[int]) -> list[int]:
    """Pin every thread of this process to `cpus` and return the process's affinity afterwards.
    sched_setaffinity binds one thread; threads started later inherit the mask of the thread that
    starts them, so the pools a framework creates after this call stay inside `cpus`, and the
    threads that already run (numpy's BLAS pool, watchdogs) are pinned here one by one."""
    cpus = set(cpus)
    if not hasattr(os, "sched_setaffinity"):
        return allowed_cpus()
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = []
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # the thread ended meanwhile
            pass
    os.sched_setaffinity(0, cpus)
    return allowed_cpus()


@dataclass(frozen=True)
class CpuClock:
    """One reading of the clocks a row's share is judged by: this process's CPU seconds (user +
    system, all threads; getrusage, to the microsecond, where os.times counts 10 ms ticks), wall
    seconds (perf_counter), and the busy seconds of the CPUs it may run on, whoever ran there
    (/proc/stat: user, nice, system, irq, softirq and steal, the time a hypervisor gave to another
    machine; None where unreadable)."""

    cpu_s: float
    wall_s: float
    cpus_busy_s: float | None
    machine_busy_s: float | None = None  # the same over every CPU of the machine


def _busy_s(cpus: Iterable[int] | None) -> float | None:
    """Busy seconds of `cpus` (None: the whole machine, /proc/stat's "cpu" line) since boot."""
    wanted = {"cpu"} if cpus is None else {f"cpu{c}" for c in cpus}
    try:
        lines = Path("/proc/stat").read_text().splitlines()
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    busy, found = 0, 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
            busy += user + nice + system + irq + softirq + steal
            found += 1
    return busy / tick if found == len(wanted) else None


def cpu_clock() -> CpuClock:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return CpuClock(usage.ru_utime + usage.ru_stime, time.perf_counter(), _busy_s(allowed_cpus()), _busy_s(None))


def machine_others(interval_s: float = 0.3) -> float | None:
    """CPUs' worth of work on the whole machine over the next `interval_s` seconds (this process
    sleeps meanwhile): what is busy now, not a minute's average. None where /proc/stat is unreadable."""
    before = _busy_s(None)
    start = time.perf_counter()
    time.sleep(interval_s)
    after = _busy_s(None)
    if before is None or after is None:
        return None
    return max(0.0, after - before) / (time.perf_counter() - start)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def cpu_record(
    threads: int,
    affinity: Sequence[int],
    spans: Sequence[tuple[CpuClock, CpuClock]],
    *,
    load_start: Sequence[float],
    load_end: Sequence[float],
) -> dict[str, Any]:
    """What a row had of the machine: its CPU list, over its timed loops (`spans`: (before, after)
    readings around each) its CPU time / wall ratio and how many of its CPUs' worth other work
    used meanwhile (their busy time less its own), the load average at its start and end, and the
    notes (contention_notes) that say why its times may not be its own."""
    cpu = sum(b.cpu_s - a.cpu_s for a, b in spans)
    wall = sum(b.wall_s - a.wall_s for a, b in spans)
    busy = [b.cpus_busy_s - a.cpus_busy_s for a, b in spans if a.cpus_busy_s is not None and b.cpus_busy_s is not None]
    measurable = bool(spans) and len(busy) == len(spans) and wall >= MIN_OTHERS_WALL_S
    others = max(0.0, sum(busy) - cpu) / wall if measurable else None
    machine = [
        b.machine_busy_s - a.machine_busy_s
        for a, b in spans
        if a.machine_busy_s is not None and b.machine_busy_s is not None
    ]
    on_machine = max(0.0, sum(machine) - cpu) / wall if measurable and len(machine) == len(spans) else None
    rec: dict[str, Any] = {
        "threads": threads,
        "affinity": sorted(int(c) for c in affinity),
        "machine_cpus": os.cpu_count() or 1,
        "timed_cpu_s": cpu if spans else None,
        "timed_wall_s": wall if spans else None,
        "cpu_ratio": cpu / wall if spans and wall > 0 else None,
        "others_on_cpus": others,
        "others_on_machine": on_machine,
        "load_start": list(load_start),
        "load_end": list(load_end),
        "method": "cpu_ratio: process CPU time (getrusage user+system) / wall over the timed loops (warm-ups "
        "included); others_on_cpus: busy time of the affinity's CPUs (/proc/stat, steal included) less "
        f"the process's own, / wall, in CPUs (null when the loops took under {MIN_OTHERS_WALL_S:g} s: "
        "10 ms ticks); others_on_machine: the same over every CPU of the machine; load: 1/5/15-minute "
        "load averages (recorded, not judged: a minute's average counts this run's own earlier rows)",
    }
    rec["notes"] = contention_notes(rec)
    return rec


def contention_notes(cpu: Mapping[str, Any]) -> list[str]:
    """Why a row's times may not be its own (keys of NOTES), from its `cpu` record:
    over_share: cpu_ratio > threads * OVER_SHARE (it ran on more cores than it was given);
    load: other work on the whole machine while the row was timed (others_on_machine, measured
        from /proc/stat like `contended`) exceeded the cores the row left free (machine_cpus -
        threads) by more than CONTENDED_CPUS: it cannot all have run beside the row. The 1-minute
        load average is not judged: it lags, and counts this run's own earlier rows and compiles,
        so it marked rows on an idle machine;
    contended: other work (other processes, the kernel's interrupts, a hypervisor's steal) used
        more than CONTENDED_CPUS of the row's own CPUs during its timed loops (measured, not a load
        estimate: /proc/stat per CPU, 10 ms ticks)."""
    threads = cpu.get("threads") or 1
    notes = []
    ratio = cpu.get("cpu_ratio")
    if ratio is not None and ratio > threads * OVER_SHARE:
        notes.append("over_share")
    on_machine = cpu.get("others_on_machine")
    if on_machine is not None and on_machine > (cpu.get("machine_cpus") or 1) - threads + CONTENDED_CPUS:
        notes.append("load")
    others = cpu.get("others_on_cpus")
    if others is not None and others > CONTENDED_CPUS:
        notes.append("contended")
    return notes


def load_line(threads: int, cores: int | None = None, load: float | None = None, busy: float | None = None) -> str:
    """'load average 1.9 on 2 cores at start, 1.8 cores busy now: timings may be contended': the one
    line a run says about the machine before it times. Contended when the work measured now (busy:
    machine_others, CPUs' worth over a moment) exceeds the cores the rows leave free by more than
    CONTENDED_CPUS, as a row's `load` note judges; the 1-minute load average is only reported (it
    lags: on an idle machine it still counts the last minute's work)."""
    cores = cores or os.cpu_count() or 1
    if load is None:
        averages = load_average()
        load = averages[0] if averages else 0.0
    if busy is None:
        busy = machine_others()
    contended = busy is not None and busy > cores - threads + CONTENDED_CPUS
    now = f", {busy:.1f} cores busy now" if busy is not None else ""
    plural = "s" if threads != 1 else ""
    return f"load average {load:.1f} on {cores} cores at start{now}" + (
        f": timings may be contended ({threads} thread{plural} per row)" if contended else ""
    )
