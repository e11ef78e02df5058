"""The analytic FLOP counts (models/*.py `flops`) against torch's own FLOP counter.

torch.utils.flop_counter counts matmul-class ops only, so the check is on the matmul part of the
count, exactly, for the forward and for forward+backward of the plain torch loop at two sizes
(a count with a wrong power of a size agrees at one size only)."""

from __future__ import annotations

import pytest

from rnnbench import registry
from rnnbench.model import Model

SIZES = ({}, {"T": 5, "B": 3, "I": 7, "H": 6, "K": 5, "n": 5})


def test_every_model_counts_its_flops(core_model_name: str) -> None:
    model = registry.get_model(core_model_name)
    assert model.flops is not None, f"{core_model_name} has no flops(sizes)"
    counted = model.flops(model.default_sizes)
    assert 0 < counted["fwd"] < counted["fwd_bwd"]


def _measured(model: Model, overrides: dict) -> tuple[float, float]:
    from torch.utils.flop_counter import FlopCounterMode

    case = model.make_case(model.sizes_with_defaults(overrides), 0)
    prepared = registry.get_driver("torch_loop").prepare(model, case, "float64", "cpu")
    with FlopCounterMode(display=False) as fwd:
        prepared.forward()
    with FlopCounterMode(display=False) as both:
        prepared.forward_backward()
    return fwd.get_total_flops(), both.get_total_flops()


@pytest.mark.parametrize("overrides", SIZES, ids=("defaults", "odd"))
def test_matmul_flops_match_torch_counter(core_model_name: str, overrides: dict) -> None:
    model = registry.get_model(core_model_name)
    counted = model.flops(model.sizes_with_defaults(overrides))
    fwd, fwd_bwd = _measured(model, overrides)
    assert counted["matmul_fwd"] == fwd
    assert counted["matmul_fwd_bwd"] == fwd_bwd
