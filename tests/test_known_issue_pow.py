"""The torch-pow-double-backward-drops-exponent-term entry: its condition follows the mechanism (a
Tensor ** Tensor with base and exponent differentiated, an exponent entry exactly 0 at a base > 0), and
the torch loop's H v of its witness is the one torch's masked derivative gives, not the true one."""

from __future__ import annotations

import numpy as np
import pytest

from rnnbench import registry
from rnnbench.check.bugs.conditions import CONDITIONS
from rnnbench.check.bugs.known_issues import installed_version, version_matches
from rnnbench.check.bugs.known_issues import registry as issues
from rnnbench.model import Case, Model

POW = CONDITIONS["pow_exponent_exactly_zero"]


def _one_step(step, c0: float, grad: bool = True) -> tuple[Model, Case]:
    model = Model(
        name="pow_probe",
        summary="",
        carry_names=("c",),
        default_sizes={"T": 1, "n": 1},
        make_case=lambda sizes, seed: None,
        step=step,
        loss=lambda ops, consts, ys, carry: ops.sum(ys) + ops.sum(carry[0]),
    )
    case = Case(
        model="pow_probe",
        sizes={"T": 1, "n": 1},
        seed=0,
        params={"p": np.array([0.3])},
        carry0=(np.array([c0]),),
        xs=None,
        length=1,
        consts={},
        carry0_requires_grad=(grad,),
    )
    return model, case


def _learned(ops, params, carry, x):
    (c,) = carry
    new = (1.5 + ops.tanh(params["p"])) ** c
    return (new,), new


def _constant_base(ops, params, carry, x):
    (c,) = carry
    new = 2.0 ** (c * params["p"])  # a Python base: torch's pow.Scalar, no pow_backward_self
    return (new,), new


@pytest.mark.parametrize(
    "step, c0, grad, covered",
    [
        (_learned, 0.0, True, True),
        (_learned, 0.25, True, False),  # the exponent is not 0
        (_learned, 0.0, False, False),  # the exponent is not differentiated
        (_constant_base, 0.0, True, False),
    ],
)
def test_the_pow_condition_follows_the_mechanism(step, c0: float, grad: bool, covered: bool) -> None:
    model, case = _one_step(step, c0, grad)
    assert POW(model, case, "float64") is covered


def test_the_witness_and_its_variants() -> None:
    def covers(name: str) -> bool:
        m = registry.get_model(name)
        return POW(m, m.make_case(m.sizes_with_defaults(), 0), "float64")

    assert covers("learned_power") and covers("learned_power@params_in_carry")
    assert not covers("learned_power@carry0_nograd") and not covers("rnn")


def test_torch_drops_exactly_the_mixed_term() -> None:
    """d/db (df/da) of a ** b at b = 0 is 1 / a; torch's is 0 on the registered versions, and the
    other mixed derivative is 1 / a: the lost term is the whole symptom."""
    torch = pytest.importorskip("torch")
    a = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    df_da, df_db = torch.autograd.grad(a**b, (a, b), create_graph=True)
    (cross,) = torch.autograd.grad(df_db, a)
    assert cross.item() == pytest.approx(0.5, rel=1e-15)
    (dropped,) = torch.autograd.grad(df_da, b, allow_unused=True)
    entry = next(i for i in issues() if i.id == "torch-pow-double-backward-drops-exponent-term")
    got = 0.0 if dropped is None else dropped.item()
    if version_matches(installed_version("torch") or "0", entry.versions["torch"]):
        assert got == 0.0
    else:
        assert got == pytest.approx(0.5, rel=1e-15)
