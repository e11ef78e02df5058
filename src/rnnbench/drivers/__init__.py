"""Drivers: how a model is run. One module per driver; each exposes `DRIVER`.

Modules whose name starts with "_" hold shared helpers and are not drivers.
"""
