"""The statistics of `rnnbench compare`: the ratio of two medians (new / base) with a confidence
interval, and the time verdict it supports at a threshold.

The interval is a percentile bootstrap, seeded, so the same two files always give the same
interval. It is hierarchical: a side's runs (the records of one row on that side: several where
the row ran in several rounds, as `--commits` runs it) are resampled first, then each chosen run's
own samples, and the pooled median is taken. With several runs per side the interval covers what
changes from process to process (measured to dominate on a shared machine); with one run per side
it covers only the noise within that run's process, and says so (`runs`).

A side without samples (records written before the schema kept them, or quartiles only) has no
interval: its verdict rests on the quartiles, `noisy` unless the two interquartile ranges are
disjoint and the ratio is beyond the threshold (`quartiles_verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000  # bootstrap resamples per interval (its ends are printed to two decimals)
SEED = 0

FASTER, SLOWER, SAME, NOISY = "faster", "slower", "same", "noisy"


@dataclass(frozen=True)
class Side:
    """One side's timing of one quantity of one row: the medians and quartiles of each run (ms),
    and each run's kept samples (empty where the record has none)."""

    medians: tuple[float, ...]
    q1: tuple[float, ...]
    q3: tuple[float, ...]
    samples: tuple[tuple[float, ...], ...]

    @property
    def has_samples(self) -> bool:
        return bool(self.samples) and all(len(s) >= 2 for s in self.samples)

    @property
    def median(self) -> float:
        """The pooled median of every run's samples, else the median of the runs' medians."""
        if self.has_samples:
            return float(np.median(np.concatenate([np.asarray(s) for s in self.samples])))
        return float(np.median(self.medians))

    @property
    def iqr(self) -> tuple[float, float]:
        """The interquartile range: of the pooled samples, else the widest of the runs' ranges."""
        if self.has_samples:
            q1, q3 = np.percentile(np.concatenate([np.asarray(s) for s in self.samples]), [25, 75])
            return float(q1), float(q3)
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
        return Estimate(self.ratio / factor, lo, hi, self.method, self.runs)


def _bootstrap_medians(runs: Sequence[Sequence[float]], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """(resamples,) pooled medians: each resample draws len(runs) runs with replacement, then each
    drawn run's samples with replacement (as many as it has); shorter runs are NaN-padded."""
    arrays = [np.asarray(r, dtype=float) for r in runs]
    k, width = len(arrays), max(len(a) for a in arrays)
    picks = rng.integers(0, k, size=(resamples, k))
    pooled = np.full((resamples, k, width), np.nan)
    for c, values in enumerate(arrays):
        rows, cols = np.nonzero(picks == c)
        if rows.size:
            pooled[rows, cols, : len(values)] = values[rng.integers(0, len(values), size=(rows.size, len(values)))]
    return np.nanmedian(pooled.reshape(resamples, k * width), axis=1)


def estimate(base: Side, new: Side, alpha: float, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """The ratio new / base of the medians, with a bootstrap interval where both sides have samples."""
    ratio = new.median / base.median
    runs = (len(base.medians), len(new.medians))
    if not (base.has_samples and new.has_samples):
        return Estimate(ratio, None, None, "quartiles", runs)
    rng = np.random.default_rng(seed)
    ratios = _bootstrap_medians(new.samples, rng, resamples) / _bootstrap_medians(base.samples, rng, resamples)
    lo, hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return Estimate(ratio, float(lo), float(hi), "bootstrap", runs)


def verdict(est: Estimate, threshold: float, base: Side, new: Side, factor: float = 1.0) -> str:
    """faster / slower / same / noisy at `threshold` (0.1: 10 %).

    With an interval: `slower` when it lies wholly above 1 (the noise measured in both runs does
    not explain the change) and the ratio is above 1 + threshold; `faster` likewise below 1 and
    1 / (1 + threshold); `same` when the whole interval lies within [1 / (1 + threshold),
    1 + threshold] (whatever changed, it is smaller than the threshold); else `noisy`: the spread
    is too wide to decide at the threshold. Without one: quartiles_verdict."""
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if est.lo is None or est.hi is None:
        return quartiles_verdict(est, up, down, base, new, factor)
    if est.lo > 1.0 and est.ratio > up:
        return SLOWER
    if est.hi < 1.0 and est.ratio < down:
        return FASTER
    if est.lo >= down and est.hi <= up:
        return SAME
    return NOISY


def quartiles_verdict(est: Estimate, up: float, down: float, base: Side, new: Side, factor: float = 1.0) -> str:
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
