"""What one run of the idiomatic comparison measures: its points, T sweep, rounds and budgets."""

from __future__ import annotations

import json
from dataclasses import dataclass

DTYPE, DEVICE, SEED = "float32", "cpu", 0
MODELS = ("lstm", "rnn")

REVIEW = {"T": 128, "B": 32, "I": 128, "H": 256}  # the size of the performance review
SMALL = {"T": 32, "B": 8, "I": 32, "H": 64}  # per-op overhead dominates; the T sweep's size


@dataclass(frozen=True)
class Plan:
    """What one run measures. points: (model, sizes) of the comparison; sweep: the T values of
    the T-growth sweep, run on sweep_model at sweep_sizes."""

    points: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    sweep_model: str
    sweep_sizes: tuple[tuple[str, int], ...]
    sweep: tuple[int, ...]
    unrolls: tuple[int, ...]
    rounds: int
    target_sample_ms: float
    slow_call_s: float
    first_call_budget_s: float  # in the sweep
    point_first_call_budget_s: float  # at the comparison points not in the sweep
    threads: int

    @classmethod
    def from_json(cls, text: str) -> Plan:
        d = json.loads(text)
        pairs = lambda items: tuple((k, int(v)) for k, v in items)  # noqa: E731
        return cls(
            **{
                **d,
                "points": tuple((m, pairs(s)) for m, s in d["points"]),
                "sweep_sizes": pairs(d["sweep_sizes"]),
                "sweep": tuple(d["sweep"]),
                "unrolls": tuple(d["unrolls"]),
            }
        )

    def all_points(self) -> list[tuple[str, dict[str, int]]]:
        """Every (model, sizes) to measure, in order: the sweep by increasing T first (the budget
        rule extrapolates from smaller T), then the comparison points not already in it."""
        out = [(self.sweep_model, {**dict(self.sweep_sizes), "T": t}) for t in sorted(self.sweep)]
        for model, sizes in self.points:
            if (model, dict(sizes)) not in out:
                out.append((model, dict(sizes)))
        return out


def plan_for(quick: bool, threads: int) -> Plan:
    if quick:
        # A test of the machinery, not a measurement: the smallest sizes that keep every dimension
        # distinct (I != H, B > 1) and two sweep points, as small as possible because the unrolled
        # candidates' compile grows with T (jax_loop's LSTM as T^2; docs/measuring.md#the-quick-mode).
        tiny = {"T": 8, "B": 2, "I": 3, "H": 4}
        return Plan(
            points=tuple((m, tuple(tiny.items())) for m in MODELS),
            sweep_model="lstm",
            sweep_sizes=tuple(tiny.items()),
            sweep=(4, 8),
            unrolls=(1, 4),
            rounds=3,
            target_sample_ms=2.0,
            # Every candidate runs (the test wants every status ok): the first compiled
            # call carries the process's one-time inductor start-up, which the T
            # extrapolation would double past a tight budget (docs/measuring.md#the-quick-mode).
            slow_call_s=5.0,
            first_call_budget_s=900.0,
            point_first_call_budget_s=900.0,
            threads=threads,
        )
    # The sweep runs at the small size (its T=32 point is the small comparison point): eager calls
    # stay cheap up to T=512, and compile times do not depend on B, I, H.
    return Plan(
        points=tuple((m, tuple(s.items())) for m in MODELS for s in (SMALL, REVIEW)),
        sweep_model="lstm",
        sweep_sizes=tuple(SMALL.items()),
        sweep=(32, 64, 128, 256, 512),
        unrolls=(1, 2, 4),
        rounds=11,
        target_sample_ms=20.0,
        slow_call_s=1.0,
        first_call_budget_s=45.0,
        point_first_call_budget_s=200.0,
        threads=threads,
    )
