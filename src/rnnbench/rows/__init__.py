"""Conducting rows: check one (driver, case) pair (pair: every caller's one path to a verdict), time
it (timing), measure its memory, record it (row), in worker processes (worker, runner), as sweeps,
as asv / pytest-benchmark entries (checked), and as units on a Ray cluster (executors)."""
