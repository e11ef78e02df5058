"""The order statistics a timed quantity is summarized by, in one place: rows.timing records them
(Timing, instability) and report recomputes them from kept samples (compare.pairs, compare.stats),
so a quartile read back is the one a record would hold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def quartiles(samples: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """(q1, median, q3) of `samples` (numpy's percentiles 25, 50, 75, linear interpolation)."""
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float(q1), float(med), float(q3)
