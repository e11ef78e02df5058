"""The statistics of `rnnbench compare`: the ratio of two medians (new / base) with a confidence
interval, and the time verdict it supports at a threshold.

The interval is a percentile bootstrap, seeded, so the same two files always give the same
interval. It is hierarchical: a side's runs (the records of one row on that side: several where
the row ran in several rounds, as `--commits` runs it) are resampled first, then each chosen run's
own samples, and the pooled median is taken. With several runs per side the interval covers what
changes from process to process (measured to dominate on a shared machine); with one run per side
it covers only the noise within that run's process, and says so (`runs`).

The resamples are drawn as counts, never as arrays of drawn values: how often each run is drawn,
then how often each of its samples is (drawing a run m times draws m times as many of its
samples), and the pooled median is the weighted median of the sorted samples. Memory is CHUNK
resamples x the side's samples, whatever the number of runs (which the caller caps).

A side without samples (records written before the schema kept them, or quartiles only) has no
interval: its verdict rests on the quartiles, `noisy` unless the two interquartile ranges are
disjoint and the ratio is beyond the threshold (`quartiles_verdict`).

The statistic is the median of wall times, or, where every run of both sides was decided by its
CPU time (a record's `timing.clock`), a low quantile (CPU_QUANTILE) of the CPU times: other work
only ever adds to a call's CPU time (caches refilled after another process ran, a hypervisor's
stolen time counted to the running process), so the low end is the call's own cost
(docs/measuring.md#busy-machines-which-clock-decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rnnbench.stats import quartiles

RESAMPLES = 2000  # bootstrap resamples per interval (its ends are printed to two decimals)
CHUNK = 250  # resamples drawn at once: bounds the (CHUNK, samples) count arrays
SEED = 0
CPU_QUANTILE = 0.1  # the statistic of CPU-time samples (module docstring); wall samples: the median

FASTER, SLOWER, SAME, NOISY = "faster", "slower", "same", "noisy"


@dataclass(frozen=True)
class Side:
    """One side's timing of one quantity of one row: the medians and quartiles of each run (ms),
    and each run's kept samples (empty where the record has none)."""

    medians: tuple[float, ...]
    q1: tuple[float, ...]
    q3: tuple[float, ...]
    samples: tuple[tuple[float, ...], ...]
    quantile: float = 0.5  # the statistic: 0.5, the median (wall); CPU_QUANTILE for CPU times
    clock: str = "wall"  # "cpu" where the samples are CPU times
    # each run's machine-speed reference samples on the same clock, paired with `samples` by index
    # (rnnbench.machine.reference); empty where the records have none
    refs: tuple[tuple[float, ...], ...] = ()

    @property
    def has_refs(self) -> bool:
        return self.has_samples and len(self.refs) == len(self.samples) and all(len(r) >= 2 for r in self.refs)

    def reference(self) -> list[float]:
        """Each run's reference statistic (the side's quantile of its reference samples), ms."""
        return [float(np.quantile(r, self.quantile)) for r in self.refs]

    def relative(self) -> Side:
        """This side in units of its runs' references: each run's times divided by its own
        reference statistic (module docstring), the references dropped. Needs has_refs."""
        scale = self.reference()
        return Side(
            tuple(m / s for m, s in zip(self.medians, scale, strict=True)),
            q1=tuple(q / s for q, s in zip(self.q1, scale, strict=True)),
            q3=tuple(q / s for q, s in zip(self.q3, scale, strict=True)),
            samples=tuple(tuple(x / s for x in run) for run, s in zip(self.samples, scale, strict=True)),
            quantile=self.quantile,
            clock=self.clock,
        )

    @property
    def has_samples(self) -> bool:
        return bool(self.samples) and all(len(s) >= 2 for s in self.samples)

    @property
    def median(self) -> float:
        """The statistic (the `quantile`) of every run's samples pooled, else the median of the
        runs' medians."""
        if self.has_samples:
            return float(np.quantile(np.concatenate([np.asarray(s) for s in self.samples]), self.quantile))
        return float(np.median(self.medians))

    def per_run(self) -> list[float]:
        """The statistic of each run's samples alone (empty without samples)."""
        return [float(np.quantile(s, self.quantile)) for s in self.samples] if self.has_samples else []

    @property
    def iqr(self) -> tuple[float, float]:
        """The interquartile range: of the pooled samples, else the widest of the runs' ranges."""
        if self.has_samples:
            q1, _, q3 = quartiles(np.concatenate([np.asarray(s) for s in self.samples]))
            return q1, q3
        return min(self.q1), max(self.q3)


@dataclass(frozen=True)
class Estimate:
    """new / base: the ratio of medians and, where both sides have samples, its 1 - alpha
    interval (lo, hi; None without); method says which; runs: (base, new) runs pooled."""

    ratio: float
    lo: float | None
    hi: float | None
    method: str  # "bootstrap" or "quartiles"
    runs: tuple[int, int]

    def scaled(self, factor: float) -> Estimate:
        """The estimate divided by `factor` (a machine-speed factor: --normalize)."""
        lo = None if self.lo is None else self.lo / factor
        hi = None if self.hi is None else self.hi / factor
        return Estimate(self.ratio / factor, lo=lo, hi=hi, method=self.method, runs=self.runs)


def _weighted_quantiles(values: np.ndarray, counts: np.ndarray, q: float = 0.5) -> np.ndarray:
    """(n,) `q`-quantiles of n multisets of the sorted `values` (K,), each given by its `counts`
    (n, K), interpolated between the two ranks around q * (total - 1) as np.quantile does (q = 0.5:
    the middle element, or the mean of the two middle ones, as np.median)."""
    cum = np.cumsum(counts, axis=1)
    position = q * (cum[:, -1] - 1)
    below = np.floor(position)
    lower = values[np.argmax(cum > below[:, None], axis=1)]
    upper = values[np.argmax(cum > np.ceil(position)[:, None], axis=1)]
    return lower + (upper - lower) * (position - below)


def _bootstrap_medians(
    runs: Sequence[Sequence[float]], rng: np.random.Generator, resamples: int, *, chunk: int = CHUNK, q: float = 0.5
) -> np.ndarray:
    """(resamples,) pooled `q`-quantiles (medians by default): each resample draws len(runs) runs
    with replacement, then each drawn run's samples with replacement (as many as it has), counted (module docstring)."""
    arrays = [np.asarray(r, dtype=float) for r in runs]
    k, values = len(arrays), np.concatenate(arrays)
    order = np.argsort(values, kind="stable")
    out = np.empty(resamples)
    for start in range(0, resamples, chunk):
        n = min(chunk, resamples - start)
        drawn = rng.multinomial(k, np.full(k, 1 / k), size=n)  # (n, k): times each run is drawn
        counts = np.concatenate(
            [rng.multinomial(drawn[:, c] * len(a), np.full(len(a), 1 / len(a))) for c, a in enumerate(arrays)], axis=1
        )  # (n, samples): times each sample is drawn
        out[start : start + n] = _weighted_quantiles(values[order], counts[:, order], q)
    return out


def estimate(base: Side, new: Side, alpha: float, *, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """The ratio new / base of the medians, with a bootstrap interval where both sides have samples."""
    ratio = new.median / base.median
    runs = (len(base.medians), len(new.medians))
    if not (base.has_samples and new.has_samples):
        return Estimate(ratio, lo=None, hi=None, method="quartiles", runs=runs)
    rng = np.random.default_rng(seed)
    ratios = _bootstrap_medians(new.samples, rng, resamples, q=new.quantile) / _bootstrap_medians(
        base.samples, rng, resamples, q=base.quantile
    )
    lo, hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return Estimate(ratio, lo=float(lo), hi=float(hi), method="bootstrap", runs=runs)


def verdict(est: Estimate, threshold: float, *, base: Side, new: Side, factor: float = 1.0) -> str:
    """faster / slower / same / noisy at `threshold` (0.1: 10 %).

    With an interval: `slower` when it lies wholly above 1 (the noise measured in both runs does
    not explain the change) and the ratio is above 1 + threshold; `faster` likewise below 1 and
    1 / (1 + threshold); `same` when the whole interval lies within [1 / (1 + threshold),
    1 + threshold] (whatever changed, it is smaller than the threshold); else `noisy`: the spread
    is too wide to decide at the threshold. Without one: quartiles_verdict."""
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if est.lo is None or est.hi is None:
        return quartiles_verdict(est, up, down, base=base, new=new, factor=factor)
    if est.lo > 1.0 and est.ratio > up:
        return SLOWER
    if est.hi < 1.0 and est.ratio < down:
        return FASTER
    if est.lo >= down and est.hi <= up:
        return SAME
    return NOISY


def quartiles_verdict(est: Estimate, up: float, down: float, *, base: Side, new: Side, factor: float = 1.0) -> str:
    """Without samples there is no interval: `slower` / `faster` only when the interquartile ranges
    (the new one divided by the machine factor) are disjoint and the ratio is beyond the
    threshold; otherwise `noisy`, never `same` (nothing bounds how large an unseen change is)."""
    (b1, b3), (n1, n3) = base.iqr, new.iqr
    n1, n3 = n1 / factor, n3 / factor
    if n1 > b3 and est.ratio > up:
        return SLOWER
    if n3 < b1 and est.ratio < down:
        return FASTER
    return NOISY
