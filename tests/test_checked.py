"""prepare_checked / verify, the entry point asv and pytest-benchmark share: a wrong gradient
raises (so that benchmark fails and gets no time), an inapplicable pair raises NotImplementedError
(asv's n/a), and verify judges a returned (loss, grads) value with the one tolerance policy."""

from __future__ import annotations

import dataclasses

import pytest

from rnnbench import registry
from rnnbench.rows import checked
from rnnbench.rows.checked import GradientDisagreement, NotApplicable, prepare_checked, verify


def test_inapplicable_pair_is_not_implemented() -> None:
    with pytest.raises(NotImplementedError, match="vendor layer computes lstm only"):
        prepare_checked("rnn", "torch_nn_lstm")
    assert issubclass(NotApplicable, NotImplementedError)


def test_wrong_gradient_raises_with_the_report(monkeypatch) -> None:
    loop = registry.get_driver("torch_loop")

    def prepare(model, case, dtype, device):
        p = loop.prepare(model, case, dtype, device)

        def doubled():
            loss, grads = p.loss_and_grads()
            return loss, {k: None if g is None else 2 * g for k, g in grads.items()}

        return dataclasses.replace(p, loss_and_grads=doubled)

    broken = dataclasses.replace(loop, name="doubled", prepare=prepare)
    monkeypatch.setattr(checked.registry, "get_driver", lambda name: broken)
    with pytest.raises(GradientDisagreement, match="grad_mismatch"):
        prepare_checked("rnn", "doubled")


def test_verify_judges_a_returned_value() -> None:
    check, prepared = prepare_checked("rnn", "torch_loop")
    loss, grads = prepared.loss_and_grads()
    assert verify("rnn", loss, grads).status == "ok"
    assert verify("rnn", loss, {**grads, "W_hh": grads["W_hh"] * 1.01}).status == "grad_mismatch"
