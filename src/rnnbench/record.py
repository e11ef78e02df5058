"""Result records: one JSON object per (model, driver, sizes, dtype, device) row. What every record
says of itself: its identifying fields (identity(), with the version and machine it ran on), what
makes two records one row (RowKey, row_key()) and the fingerprint --resume matches. The file they
are written to and read from is rnnbench.results_file."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rnnbench.record_fields import FIELDS, TIMING_FIELDS, problem  # noqa: F401 (readers ask record.problem)

SCHEMA = 3  # 2: rnnbench_version, settings and fingerprint; no NaN (null instead). 3: fwd and fwd_bwd keep
# `samples`, a bounded subsample of the timed calls (rnnbench.rows.timing.kept_samples); older records lack it


def identity(
    *,
    model: str,
    driver: str,
    framework: str,
    family: str,
    anchor: bool,
    environment: str,
    env_label: str,
    dtype: str,
    device: str,
    sizes: dict[str, int],
    seed: int,
    loss_form: str = "model",
    settings: dict[str, Any] | None = None,
    mode: str = "vjp",
) -> dict[str, Any]:
    """The identifying fields every record has, whatever happened to the row: the one constructor
    (rnnbench.rows.row.Job.identity builds it for a job). env_label names what the row ran on by its
    framework's version ("torch 2.13.0", "jax 0.10.2") where known, else by its environment's name.
    settings: what else determines the row's result (threads, timing, order, package versions);
    with the row key it makes the record's fingerprint, which --resume matches. mode: the
    differentiation mode (rnnbench.modes) the row's gradients came by."""
    rec = {
        "schema": SCHEMA,
        "rnnbench_version": rnnbench_version(),
        "model": model,
        "driver": driver,
        "framework": framework,
        "framework_family": family,
        "environment_name": environment,
        "env_label": env_label,
        "anchor": anchor,
        "dtype": dtype,
        "device": device,
        "sizes": dict(sizes),
        "seed": seed,
        "loss_form": loss_form,
        "mode": mode,
        "settings": dict(settings or {}),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
    }
    rec["fingerprint"] = fingerprint(rec)
    return rec


SAMPLES_KEPT = 64  # timed samples a record keeps per quantity: enough for a bootstrap interval of the median


def kept_samples(samples: Sequence[float], keep: int = SAMPLES_KEPT) -> tuple[float, ...]:
    """At most `keep` of `samples` (a timing's `samples`), evenly spaced over the run and in its
    order (all of them when there are fewer): bounded, deterministic, and still spanning a drift
    from start to end. Rounded to 6 significant digits, to keep records small."""
    n = len(samples)
    picked = samples if n <= keep else [samples[round(i * (n - 1) / (keep - 1))] for i in range(keep)]
    return tuple(float(f"{x:.6g}") for x in picked)


@functools.cache
def rnnbench_version() -> str:
    """The package version, plus the commit (and "dirty" for uncommitted edits) when rnnbench runs
    from a git checkout of itself: results from two commits are never taken for one another."""
    try:
        __version__ = importlib.metadata.version("rnnbench")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        __version__ = "0+unknown"
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return __version__
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=10", "--exclude", "*"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return __version__
    described = proc.stdout.strip()
    return (
        f"{__version__}+g{described.replace('-dirty', '.dirty')}" if proc.returncode == 0 and described else __version__
    )


class RowKey(NamedTuple):
    """What makes two records the same row: --resume skips a done row by it, `compare` pairs rows by
    it, a fingerprint hashes it. Sizes are sorted (name, value) pairs, so that keys compare and sort."""

    model: str
    driver: str
    environment: str
    dtype: str
    device: str
    sizes: tuple[tuple[str, int], ...]
    seed: int
    loss_form: str
    mode: str = "vjp"  # the differentiation mode (rnnbench.modes): two modes of one pair are two rows

    @classmethod
    def of(
        cls,
        model: str,
        driver: str,
        *,
        environment: str,
        dtype: str,
        device: str,
        sizes: Mapping[str, int],
        seed: int,
        loss_form: str,
        mode: str = "vjp",
    ) -> RowKey:
        return cls(
            model,
            driver,
            environment=environment,
            dtype=dtype,
            device=device,
            sizes=tuple(sorted(sizes.items())),
            seed=seed,
            loss_form=loss_form,
            mode=mode,
        )

    def fingerprint(self, version: str | None, settings: Mapping[str, Any]) -> str:
        """A short hash of everything that determines a row's result: this key, the rnnbench version
        and the row's settings. Two records with one fingerprint are the same measurement setup."""
        # a vjp row hashes as before modes existed, so --resume still matches older records
        key = list(map(str, self if self.mode != "vjp" else self[:-1]))
        what = [key, version, dict(settings)]
        return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def row_key(rec: dict[str, Any], environment: bool = True) -> RowKey:
    """A record's RowKey (a field an older record lacks takes its default). environment=False puts ""
    in the environment's place: `compare --environments` pairs two environments' runs of one row."""
    env = rec.get("environment_name", "main") if environment else ""
    seed, loss_form = rec.get("seed", 0), rec.get("loss_form", "model")
    mode = rec.get("mode", "vjp")  # a record from before modes: reverse mode
    return RowKey.of(
        rec["model"],
        rec["driver"],
        environment=env,
        dtype=rec["dtype"],
        device=rec.get("device", "cpu"),
        sizes=rec.get("sizes") or {},
        seed=seed,
        loss_form=loss_form,
        mode=mode,
    )


def fingerprint(rec: dict[str, Any]) -> str:
    """The record's RowKey.fingerprint, from its own version and settings (what --resume matches)."""
    return row_key(rec).fingerprint(rec.get("rnnbench_version"), rec.get("settings") or {})


def machine() -> dict[str, Any]:
    """Identity of the machine, so results from several machines can be merged and told apart."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}


def accelerator_label(accelerator: dict[str, Any]) -> str:
    """How merged views name a GPU (machine.accelerator): its name and the first 8 hex digits of its
    UUID, else its index; "" for a record without one. Two GPUs are two machines."""
    name = accelerator.get("name") or accelerator.get("jax_device_kind")
    if not name and not accelerator.get("uuid"):
        return ""
    name = name or "GPU"
    uuid = str(accelerator.get("uuid") or "")
    return f"{name} {uuid.replace('GPU-', '')[:8] if uuid else '#' + str(accelerator.get('index', 0))}"


def environment(threads: int, versions: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "threads": threads,
        "versions": versions,
        "settings": settings,
        "thread_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")},
    }


def latest_per_row(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per row (the last written): a resumed file can hold a row twice when it was
    unavailable before and ran this time."""
    latest = {row_key(rec): rec for rec in records}
    return list(latest.values())
