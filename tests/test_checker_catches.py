"""The checker fails when it should: deliberately broken drivers get the right non-ok status."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from rnnbench_faulty import faulty_loop

from rnnbench import registry
from rnnbench.drivers.base import Driver
from rnnbench.rows.pair import check_gradients

TORCH_LOOP = registry.get_driver("torch_loop")


# A loop that cuts the carry cotangent between steps (carry.detach()), as docs/bugs.md §1's scan
# effectively did: the forward is exact, the gradient through time is lost.
_detached_carry_prepare = faulty_loop("detached_carry", cut_carry_from=0).prepare


def _tampered(transform) -> Driver:
    """torch_loop with its (loss, grads) passed through `transform`."""

    def prepare(model, case, dtype, device):
        p = TORCH_LOOP.prepare(model, case, dtype, device)
        return dataclasses.replace(p, loss_and_grads=lambda: transform(*p.loss_and_grads()))

    return dataclasses.replace(TORCH_LOOP, name="tampered", prepare=prepare)


def _check(driver: Driver, model_name: str, dtype: str = "float64"):
    model = registry.get_model(model_name)
    case = model.make_case(model.sizes_with_defaults(), 0).rounded_to(dtype)
    return check_gradients(model, driver, case, dtype=dtype, device="cpu")[0]


@pytest.mark.parametrize("name", ["decay", "rnn", "lstm", "newton_sqrt", "taylor_expm"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_dropped_carry_cotangent_is_grad_mismatch(name: str, dtype: str) -> None:
    broken = dataclasses.replace(TORCH_LOOP, name="detached_carry", prepare=_detached_carry_prepare)
    result = _check(broken, name, dtype)
    # With a trainable initial carry the cut also leaves d loss/d carry0 as None: missing_grad.
    carry0_trainable = any(
        registry.get_model(name).make_case(registry.get_model(name).default_sizes, 0).carry0_requires_grad
    )
    assert result.status == ("missing_grad" if carry0_trainable else "grad_mismatch"), result.report
    assert any(e.status == "mismatch" for e in result.errors), result.report
    assert result.loss_error <= result.tolerance.max_rel_error  # forward still right: the bug class
    assert "!!" in result.report


def test_reference_case_drop_gives_the_bugs_md_number() -> None:
    """On the exact docs/bugs.md §1 case the detached loop reproduces scan 2.9.0's wrong 0.1907469335."""
    from rnnbench_models.linear import bugs_section1_case

    loss, grads = _detached_carry_prepare(
        registry.get_model("decay"), bugs_section1_case(), "float64", "cpu"
    ).loss_and_grads()
    assert grads["a"][0] == pytest.approx(0.1907469335, abs=5e-11)


def test_none_gradient_is_missing_grad() -> None:
    result = _check(_tampered(lambda loss, g: (loss, {**g, "W_hh": None})), "rnn")
    assert result.status == "missing_grad"
    assert [e.name for e in result.errors if e.status == "missing"] == ["W_hh"]


def test_zero_gradient_is_missing_grad() -> None:
    result = _check(_tampered(lambda loss, g: (loss, {**g, "b": np.zeros_like(g["b"])})), "lstm")
    assert result.status == "missing_grad", result.report


def test_wrong_forward_is_forward_mismatch() -> None:
    assert _check(_tampered(lambda loss, g: (loss * 1.001, g)), "rnn").status == "forward_mismatch"


def test_one_wrong_entry_is_located() -> None:
    def poke(loss, g):
        W = g["W_ih"].copy()
        W[3, 5] += 1e-3 * np.abs(W).max()
        return loss, {**g, "W_ih": W}

    result = _check(_tampered(poke), "rnn")
    assert result.status == "grad_mismatch"
    bad = [e for e in result.errors if e.status == "mismatch"]
    assert [(e.name, e.index) for e in bad] == [("W_ih", (3, 5))]


def test_driver_exception_is_error_and_compile_failure_is_compile_error() -> None:
    import torch

    def raises(exc):
        def prepare(*args):
            raise exc

        return prepare

    plain = dataclasses.replace(TORCH_LOOP, prepare=raises(RuntimeError("boom")))
    assert _check(plain, "rnn").status == "error"
    compiled = dataclasses.replace(TORCH_LOOP, compiled=True, prepare=raises(torch._dynamo.exc.Unsupported("nope")))
    assert _check(compiled, "rnn").status == "compile_error"
