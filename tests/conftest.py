"""Test parameters are generated from the registries: a new model or driver file is tested by the
existing tests with no edit here."""

from __future__ import annotations

import pytest

from rnnbench import registry


def model_driver_pairs() -> list:
    """Every (model, driver) pair the main environment can run; inapplicable pairs are left out
    here (anchors on other model families) rather than reported as skips."""
    pairs = []
    for d in registry.drivers().values():
        if d.environment != "main":
            continue
        for m in registry.models().values():
            if d.supports(m) is None:
                pairs.append(pytest.param(m.name, d.name, id=f"{m.name}-{d.name}"))
    return pairs


def pytest_generate_tests(metafunc):
    if {"model_name", "driver_name"} <= set(metafunc.fixturenames):
        metafunc.parametrize(("model_name", "driver_name"), model_driver_pairs())
    elif "model_name" in metafunc.fixturenames:
        metafunc.parametrize("model_name", list(registry.models()))
