"""Drivers: how a model is run. One package per framework (torch, jax with flax, torch_xla); in it, one
module per MECHANISM (a torch Python loop, torch scan, lax.scan, a vendor layer, ...) whose
configurations (eager/compiled, options) are rows of its `DRIVERS` tuple, each a `Driver` with a
stable name. The registry (rnnbench.registry) collects every row.

In a framework package, modules whose name starts with "_" are the framework layer: `_framework`
builds its `Framework` object(s) with the plumbing its mechanisms share, split into parts it imports
(torch's `_compile`, `_settings`); `base` holds the interfaces. See docs/architecture.md.
"""
