"""The idiomatic comparison (rnnbench.study.idiomatic): its quick mode runs and writes valid records,
every idiomatic baseline agrees with the oracle; and the loop drivers' backward stays O(T):
torch_loop's autograd graph grows linearly with T and has no per-step index nodes, jax_loop's
optimized XLA program has no pad (the transpose of indexing xs[t]). No timing is asserted."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rnnbench import record, registry
from rnnbench.status import Status

TINY = {"B": 2, "I": 3, "H": 4}


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    pytest.importorskip("torch")
    pytest.importorskip("flax")
    out = tmp_path_factory.mktemp("idiomatic") / "quick"
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench.study.idiomatic", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return out, proc


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_quick_mode_writes_every_output(quick) -> None:
    out, proc = quick
    assert proc.returncode == 0, proc.stderr[-4000:]
    for suffix in (".jsonl", ".md", "-tgrowth.jsonl", "-tgrowth.png"):
        assert Path(f"{out}{suffix}").stat().st_size > 0, suffix
    page = Path(f"{out}.md").read_text()
    assert "python -m rnnbench.study.idiomatic --quick --out" in page  # the exact command
    assert Path(f"{out}-tgrowth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_records_are_valid_rnnbench_records(quick) -> None:
    out, _ = quick
    comparison, sweep = _records(Path(f"{out}.jsonl")), _records(Path(f"{out}-tgrowth.jsonl"))
    assert comparison and sweep
    for rec in comparison + sweep:
        assert record.problem(rec) is None, (record.problem(rec), rec["driver"])
    for rec in comparison:
        assert rec["status"] == Status.OK, (rec["driver"], rec["model"], rec.get("report"))
        assert rec["ratio"] == pytest.approx(rec["fwd_bwd"]["median_ms"] / rec["baseline_fwd_bwd"]["median_ms"])
        assert rec["loadavg"]["start"] and rec["loadavg"]["per_round_1min"]
    # one record per (mechanism, baseline family, point), and one best family per (mechanism, point)
    keys = Counter((r["driver"], r["baseline"], r["model"], json.dumps(r["sizes"])) for r in comparison)
    assert set(keys.values()) == {1}
    best = Counter((r["driver"], r["model"]) for r in comparison if r["best_idiomatic"])
    assert set(best.values()) == {1}
    assert sorted({r["sizes"]["T"] for r in sweep}) == [4, 8]


def test_every_baseline_agrees_with_the_oracle(quick) -> None:
    out, _ = quick
    comparison = _records(Path(f"{out}.jsonl"))
    from rnnbench.study import idiomatic

    families = {(r["model"], r["baseline"]) for r in comparison}
    every = {c.family for c in idiomatic.candidates(idiomatic.plan_for(True, 1)) if c.family}
    assert {"torch.nn", "unbind loop", "scan, hand-written", "jit loop", "flax nn.RNN cell", "lax.scan"} <= every
    assert families == {(m, f) for m in ("lstm", "rnn") for f in every}
    variants = {(r["model"], v["variant"]): v for r in comparison for v in r["baseline_variants"]}
    assert any(name.startswith("lax_scan[unroll=4") for _, name in variants)
    for (model, name), v in variants.items():
        assert v["status"] == Status.OK, (model, name, v)
        assert v["max_rel_error"] is not None and v["max_rel_error"] <= v["tolerance"], (model, name, v)


def test_each_mechanism_has_its_own_idiomatic_family() -> None:
    """The ratio table's same-mechanism column divides by a family the comparison runs."""
    from rnnbench.study import idiomatic
    from rnnbench.suites import MECHANISMS

    candidates = idiomatic.candidates(idiomatic.plan_for(True, 1))
    families = {c.family for c in candidates if c.family}
    assert [c.driver for c in candidates if c.mechanism] == [m.driver for m in MECHANISMS]
    assert set(idiomatic.SAME_MECHANISM.values()) <= families


def test_the_study_keeps_its_compiles_by_a_plan_not_a_global(monkeypatch) -> None:
    """A pair checked with PairPlan(fresh_compiles=False), as the study checks its candidates, keeps
    dynamo's state across compiles (the candidates of a point stay compiled together); by default a
    compile starts from a reset one; the study resets it per point (Framework.reset_compiles).
    Nothing compiles here: torch.compile only wraps until called."""
    torch = pytest.importorskip("torch")
    from rnnbench.drivers.torch import _compile as _torch_compile
    from rnnbench.drivers.torch import _framework as _torch
    from rnnbench.rows.pair import PairPlan, check_pair

    resets: list[int] = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    eager = registry.get_driver("torch_loop")

    def prepare(model, case, dtype, device):
        _torch_compile.compiled(lambda inputs: inputs)
        return eager.prepare(model, case, dtype, device)

    driver = dataclasses.replace(eager, name="wraps_a_compile", prepare=prepare)
    model = registry.get_model("rnn")
    case = model.make_case(model.sizes_with_defaults({**TINY, "T": 3}), 0)
    for fresh, expected in ((True, 1), (False, 0), (True, 1)):
        resets.clear()
        pair = check_pair(
            model,
            driver,
            case,
            dtype="float64",
            device="cpu",
            plan=PairPlan(repeat=False, localize=False, fresh_compiles=fresh),
        )
        assert pair.status == Status.OK and len(resets) == expected, (fresh, resets, pair.report)
    resets.clear()
    _torch.TORCH.reset_compiles()
    assert resets == [1]


# ---- the loops differentiate in O(T) ---------------------------------------------------------------


def _autograd_nodes(loss) -> Counter:
    seen, stack, names = set(), [loss.grad_fn], Counter()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names[type(node).__name__] += 1
        stack += [fn for fn, _ in node.next_functions]
    return names


@pytest.mark.parametrize("name", ["lstm", "rnn"])
def test_torch_loop_backward_grows_linearly_without_index_nodes(name: str) -> None:
    pytest.importorskip("torch")
    from rnnbench.drivers.torch import _framework as _torch
    from rnnbench.drivers.torch import loop as torch_loop

    model = registry.get_model(name)
    counts = {}
    for T in (8, 16, 32):
        case = model.make_case(model.sizes_with_defaults({**TINY, "T": T}), 0)
        inputs, consts, _ = _torch.model_tensors(model, case, "float64", "cpu")
        counts[T] = _autograd_nodes(torch_loop.loop_loss(model, case, consts)(inputs))
    for T, names in counts.items():
        assert not [n for n in names if "Select" in n or "Index" in n], (T, names)
        # one a step (the fused xp_t + h @ W_hh.T, no separate add) and the hoisted input projection
        assert names["AddmmBackward0"] == T + 1, (T, names)
        assert names["UnbindBackward0"] == 1, (T, names)
    if name == "rnn":  # the step has no add of its own left: only the loss's
        assert counts[8]["AddBackward0"] == counts[32]["AddBackward0"], counts
    total = {T: sum(names.values()) for T, names in counts.items()}
    assert total[32] - total[16] == 2 * (total[16] - total[8]), total  # exactly linear in T


def _jax_loop_optimized_hlo(model_name: str, T: int) -> str:
    import jax

    from rnnbench.drivers.jax import _framework as _jax
    from rnnbench.drivers.jax import loop as jax_loop

    model = registry.get_model(model_name)
    case = model.make_case(model.sizes_with_defaults({**TINY, "T": T}), 0).rounded_to("float32")
    diff, rest, consts = _jax.model_arrays(model, case, "float32", "cpu")
    loss_fn, _ = jax_loop.loop_loss(model, case, consts, dtype="float32")
    return jax.jit(jax.value_and_grad(loss_fn)).lower(diff, rest).compile().as_text()


@pytest.mark.parametrize("projection", ["hoisted", "per step"])
@pytest.mark.parametrize("name", ["lstm", "rnn"])
def test_jax_loop_optimized_program_has_no_pad(name: str, projection: str, monkeypatch) -> None:
    pytest.importorskip("jax")
    from rnnbench.drivers.jax import _framework as _jax

    if projection == "per step":  # the input projection inside the step, as large sizes run it
        monkeypatch.setattr(_jax, "PROJECTION_PER_STEP_BYTES", 0)
    for T in (8, 16):
        hlo = _jax_loop_optimized_hlo(name, T)
        ops = Counter(re.findall(r"= \S+ ([a-z][\w-]*)\(", hlo))
        assert ops["pad"] == 0, (T, ops["pad"])
        assert ops["dot"] > 0  # the counting sees the program's ops
