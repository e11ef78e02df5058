"""The fuzzer's "edge2" grammar (issue 49's classes: a layer of ReLU units dead together, ties of
branches equal to first order, stable forms written with max and abs) is opt-in: the "edge" stream
draws exactly the bodies it drew before it existed. And the fuzzer's `hvp:<framework>` plant beside
a pole (sqrt at 0, v held at 0 there) is caught, the unplanted framework's H v not called wrong."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest

from rnnbench import registry
from rnnbench.fuzz.campaign import body_fields, body_from_fields
from rnnbench.fuzz.cases import FuzzCase, build
from rnnbench.fuzz.edges import EDGE2_OPS, EDGE_OPS
from rnnbench.fuzz.grammar import Body, Grammar, body_valid, body_wrt, generate
from rnnbench.fuzz.runner import run_driver

EDGE2 = Grammar("edge2", 0.25)
DRIVERS = ("torch_loop", "jax_loop", "jax_lax_scan")
# sha256 of json.dumps([generate(1128, i, Grammar("edge", 0.25)).source() for i in range(50)]), recorded
# with the grammar of main before edge2 existed (the 2026-11-28 campaign's seed)
EDGE_SEED_1128 = "369b0d73472cb02f06a17ee3e484699737829eda7cd2f4463031d53b307bcdbc"


def test_the_edge_stream_is_unchanged_by_edge2() -> None:
    sources = [generate(1128, i, Grammar("edge", 0.25)).source() for i in range(50)]
    assert hashlib.sha256(json.dumps(sources).encode()).hexdigest() == EDGE_SEED_1128
    assert not any(set(EDGE2_OPS) & generate(1128, i, Grammar("edge", 0.25)).op_classes() for i in range(200))


def test_edge2_draws_every_op_reproducibly_and_round_trips_through_records() -> None:
    seen: set[str] = set()
    for i in range(80):
        body = generate(7, i, EDGE2)
        assert body == generate(7, i, EDGE2) and body_valid(body) and body.snap_rate == 0.25
        assert body_from_fields(body_fields(body)) == body
        compile(body.source(), "<body>", "exec")
        seen |= body.op_classes()
    assert set(EDGE_OPS) | set(EDGE2_OPS) <= seen, sorted(set(EDGE_OPS) | set(EDGE2_OPS) - seen)


def _pole_case(plant: str) -> FuzzCase:
    """c0' = 0.5 c0 + sqrt(p0 x) + tanh(p1 x), y = c0, p0 = [0, 0.5], xs = 1: sqrt at 0 on p0[0] (a
    pole: no finite derivative), the other entries' H v defined once v is held at 0 there."""
    from rnnbench.check.oracles.oracle import oracle_grads

    body = Body(
        updates=(
            (
                "bin",
                "+",
                ("bin", "*", ("const", 0.5), ("leaf", "c0")),
                (
                    "bin",
                    "+",
                    ("edge", "sqrt_raw", ("bin", "*", ("leaf", "p0"), ("leaf", "x"))),
                    ("un", "tanh", ("bin", "*", ("leaf", "p1"), ("leaf", "x"))),
                ),
            ),
        ),
        output=("leaf", "c0"),
        n=2,
        length=2,
        has_xs=True,
        carry_grad=(False,),
        xs_grad=False,
        data_seed=3,
        plant=plant,
    )
    fc = build(body)
    case = dataclasses.replace(
        fc.case, params={"p0": np.array([0.0, 0.5]), "p1": np.array([0.3, -0.2])}, xs=np.ones((2, 2))
    )
    return FuzzCase(body, fc.model, case, None, oracle_grads(fc.model, case))


@pytest.mark.parametrize("plant", ["hvp:torch", "hvp:jax"])
def test_a_planted_wrong_hvp_beside_a_pole_is_a_mismatch(plant: str) -> None:
    fc = _pole_case(plant)
    planted = "torch_loop" if plant.endswith("torch") else "jax_loop"
    with np.errstate(invalid="ignore"):
        for name in ("torch_loop", "jax_loop"):
            o = run_driver(fc, registry.get_driver(name), "float64", second_order=True)
            assert o.status == "cannot_decide", o  # first order: p0[0] has no derivative
            if name == planted:
                assert o.hvp_status == "hvp_mismatch", o
            else:
                assert o.hvp_status in ("ok", "ill_conditioned"), o


def test_edge2_draws_token_bodies_whose_ids_stay_integer() -> None:
    bodies = [generate(1128, i, EDGE2) for i in range(60)]
    tokens = [b for b in bodies if b.tokens]
    assert tokens and all(b.has_xs for b in tokens) and len(tokens) < len(bodies)
    reading = next(b for b in tokens if "x" in b.leaves_used())
    fc = build(reading, dtype="float32")
    assert fc.case.xs.dtype.kind == "i" and fc.model.integer_inputs == ("xs",)
    assert "E" in fc.case.params and "xs" not in fc.case.wrt_names(fc.model.carry_names)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_planted_wrong_embedding_gradient_is_flagged_and_the_unplanted_ok(dtype: str) -> None:
    """c0' = 0.5 c0 + relu(E[x]), y = c0: token ids index a learned embedding (every driver keeps them
    integer); torch's derivative of E planted wrong is grad_mismatch, jax's drivers are ok."""
    body = Body(
        updates=(("bin", "+", ("bin", "*", ("const", 0.5), ("leaf", "c0")), ("edge", "relu_maximum", ("leaf", "x"))),),
        output=("leaf", "c0"),
        n=3,
        length=4,
        has_xs=True,
        carry_grad=(False,),
        xs_grad=True,
        data_seed=11,
        plant="grad:torch",
        tokens=4,
    )
    assert body.planted_leaf() == "E" and "xs" not in body_wrt(body)
    fc = build(body, dtype=dtype)
    assert fc.ill_conditioned is None
    statuses = {d: run_driver(fc, registry.get_driver(d), dtype, second_order=False).status for d in DRIVERS}
    assert statuses == {"torch_loop": "grad_mismatch", "jax_loop": "ok", "jax_lax_scan": "ok"}, statuses


@pytest.mark.parametrize("driver", ["torch_loop", "jax_loop"])
def test_a_token_bodys_repro_script_keeps_the_ids_integer(tmp_path, driver: str) -> None:
    import subprocess
    import sys

    from rnnbench.fuzz.repro import export

    body = next(b for b in (generate(1128, i, EDGE2) for i in range(60)) if b.tokens and "x" in b.leaves_used())
    path = export(
        tmp_path / "repro.py",
        build(body),
        registry.get_driver(driver),
        second_order=False,
        status="ok",
        tolerance=1e-9,
        absolute_scale=0.0,
    )
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr
