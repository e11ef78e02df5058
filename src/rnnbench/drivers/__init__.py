"""Drivers: how a model is run. One module per MECHANISM (a torch Python loop, torch scan, lax.scan,
a vendor layer, ...); its configurations (eager/compiled, options) are rows of its `DRIVERS` tuple,
each a `Driver` with a stable name. The registry (rnnbench.registry) collects every row.

Modules whose name starts with "_" are the framework layer (one `Framework` object each, plus the
plumbing its mechanisms share); `base` holds the interfaces. See docs/architecture.md.
"""
