"""The machine-speed reference: a fixed calibration kernel timed inside every CPU row's timed loop,
once after each timed call, on the same thread and clocks (rnnbench.rows.timing.measure).

On a shared machine the speed a process gets moves between processes and within one, on its CPU
time too (a hypervisor's stolen time and refilled caches are counted to the running process), and
one process's samples cannot see a shift that happened between two processes. The kernel sees
the same contention as the row beside it, so `compare` judges a row by its time relative to its
own run's reference (docs/measuring.md#busy-machines-which-clock-decides): a machine that ran
both slower moves neither ratio.

The kernel is what the rows are made of at a small size: an Elman recurrence over T steps of
numpy matrix products and tanh, interpreted step by step (dispatch, small GEMMs, an elementwise
transcendental), run REPEATS times per timed sample. One recurrence timed right after a row's call
is mostly the refill of what the call evicted, which varied between processes of the same row
more than the row did; the later repeats run warm and carry the machine's speed (the measurement:
docs/measuring.md, busy machines). Its inputs are fixed, so two runs of any commit run the
same work; KERNEL names the kernel, and compare normalizes two runs only when their KERNEL is the same.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

KERNEL = "numpy-elman-T8-B8-I16-H32-x4-v2"  # change it whenever the kernel's work changes
STEPS, BATCH, INPUTS, HIDDEN = 8, 8, 16, 32
REPEATS = 4  # recurrences per timed sample (module docstring)


def kernel() -> Callable[[], float]:
    """A call of the calibration kernel: the fixed recurrence, REPEATS times (module docstring),
    returning a number that depends on every step so that nothing is skipped. Arrays: x (STEPS, BATCH, INPUTS),
    weights (INPUTS, HIDDEN) and (HIDDEN, HIDDEN), carry (BATCH, HIDDEN), float32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((STEPS, BATCH, INPUTS)).astype(np.float32)
    w_in = (rng.standard_normal((INPUTS, HIDDEN)) / np.sqrt(INPUTS)).astype(np.float32)
    w_h = (rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32)

    def run() -> float:
        total = 0.0
        for _ in range(REPEATS):
            h = np.zeros((BATCH, HIDDEN), dtype=np.float32)
            for t in range(STEPS):
                h = np.tanh(x[t] @ w_in + h @ w_h)
            total += float(h.sum())
        return total

    return run
