"""The registry of known upstream bugs (src/rnnbench/known_issues.json) and the rule that applies it.

A row's raw status comes from the gradient check. Then, for the entries that cover the row (driver,
installed framework versions, dtype, model, case conditions):
  - the row failed the way an entry says        -> "known_issue:<id>"  (visibly wrong, no speed
    number, does not fail the run);
  - the row is "ok" although an entry covers it -> "known_issue_fixed:<id>" (fails the run: the
    entry is stale and must be narrowed or removed), unless the entry is not `certain`: its
    conditions are the mechanism's necessary ones but whether the symptom shows also depends on
    what a case cannot say (an allocator's reuse order), so an ok row stays ok, with a note, and
    the entry's `witnesses` (rows on which it must reproduce) keep it from going stale;
  - the row failed some other way               -> the raw status (fails the run), with a note.
Only entries that cover a row can change it: an unlisted failure is always a plain failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from rnnbench import losses as loss_forms
from rnnbench.model import Case, Model
from rnnbench.status import WRONG_GRADIENT, Status, fixed, is_known, known

REGISTRY_PATH = Path(__file__).resolve().parents[1] / "known_issues.json"
STATUSES = tuple(WRONG_GRADIENT | {Status.COMPILE_ERROR, Status.ERROR, Status.HVP_MISMATCH, Status.HVP_ERROR})
"""What an entry may say a bug produces (the rest are not a framework's answer: crash, timeout, ...)."""

CONDITIONS: dict[str, Callable[[Model, Case], bool]] = {
    # Some initial-carry leaf is not differentiated (docs/bugs.md §1's trigger in torch 2.9.0's scan).
    "carry0_without_grad": lambda model, case: not all(case.carry0_requires_grad or (False,)),
    # Some initial-carry leaf is a 0-dimensional tensor (torch 2.9.0 inductor's scan-backward lowering).
    "zero_dim_carry": lambda model, case: any(getattr(c, "ndim", 0) == 0 for c in case.carry0),
    # The step has trainable parameters (a scan body that closes over them captures tensors).
    "has_params": lambda model, case: bool(case.params),
    # torch inductor's scan backward loop accumulates the gradient of each differentiated tensor the
    # step reads in a buffer that may alias a buffer of equal element count created after the loop:
    # the gradient of a differentiated tensor upstream of the scan (a parameter the prologue reads,
    # xs) or d loss/d xs' (docs/bugs.md#torch-inductor-scan-body-grad-reuses-donated-buffer).
    "body_grad_numel_shared_upstream": lambda model, case: _body_grad_numel_shared_upstream(model, case),
    # One carry leaf, with several entries: an unweighted sum of it gives an expanded (stride-0)
    # cotangent with several lanes (docs/bugs.md#torch-inductor-scan-expanded-carry-cotangent).
    "one_carry_leaf_of_several_entries": lambda model, case: any(
        len(carry) == 1 and np.size(carry[0]) >= 2 for carry in recurrence_carries(model, case)
    ),
    # The carry cotangent crosses a step of the backward loop: two or more steps, or a differentiated
    # initial carry (whose gradient is the loop's last carried value).
    "carry_cotangent_crosses_a_step": lambda model, case: case.length >= 2 or any(case.carry0_requires_grad),
    # Some final-carry leaf reaches the loss only through an unweighted sum, so the backward seeds the
    # scan with an expanded (stride-0) cotangent: the trigger itself, whatever the loss is called
    # (docs/bugs.md#torch-inductor-scan-expanded-carry-cotangent).
    # Here: stride 0 along a dim of size >= 2 (several lanes share one value).
    "final_carry_cotangent_expanded": lambda model, case: any(
        lanes >= 2 for lanes in expanded_carry_cotangents(model, case)
    ),
    # Two or more final-carry leaves get expanded cotangents, of any size: stride-0 views of one
    # scalar tangent, which scan's functionalization sees as aliased inputs.
    "final_carry_cotangents_expanded_twice": lambda model, case: len(expanded_carry_cotangents(model, case)) >= 2,
    # Some recurrence (one scan) carries several leaves (each an expanded cotangent under an
    # unweighted sum). A stacked model of one-leaf layers (rnn2) has none.
    "several_carry_leaves_in_a_recurrence": lambda model, case: any(
        len(carry) >= 2 for carry in recurrence_carries(model, case)
    ),
    # torch_xla's scan traces the step with every carry leaf requiring grad and x requiring grad when
    # xs' does, then back-propagates ones from every output: an output (new carry leaf or y) that
    # depends on none of them has no grad_fn (torch_xla/experimental/scan.py value_and_grad_partitioned).
    "step_output_without_grad": lambda model, case: _step_graph(model, case)[0],
    # Some carry leaf reaches no step output that has a grad_fn: the step's backward returns None for
    # it, which the reverse scan's flattening drops, so its carry is one leaf short
    # (torch_xla/experimental/scan.py _scan_impl_flat's assertion).
    "carry_leaf_unread_by_step": lambda model, case: _step_graph(model, case)[1],
    # A step output is a closed-over parameter itself (y = p, c' = p): AOTAutograd's metadata
    # collection meets the captured tensor as a tangent (torch_xla_scan_closure).
    "step_returns_a_parameter": lambda model, case: _step_graph(model, case)[2],
    # Two or more recurrences (scans) in one program: stacked or bidirectional layers.
    "several_recurrences": lambda model, case: len(recurrence_carries(model, case)) >= 2,
    # The step's backward returns one computed tensor (not a cotangent handed in) as the gradient of two
    # differentiated inputs (c' = c + x, x from xs', c' read twice): torch 2.9.0's create_bw_fn clones
    # gradients that alias its inputs, not one returned twice (_higher_order_ops/utils.py).
    "step_gradient_returned_twice": lambda model, case: _step_gradient_returned_twice(model, case),
}
"""Case predicates that entries name in affects.conditions. Add one here for a new bug class."""


class _Reads(dict):
    """A params mapping that records which names a function reads."""

    def __init__(self, params: Mapping) -> None:
        super().__init__(params)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def _all(self):
        self.read.update(self.keys())

    def items(self):
        self._all()
        return super().items()

    def values(self):
        self._all()
        return super().values()

    def __iter__(self):
        self._all()
        return super().__iter__()


def differentiated_sizes(model: Model, case: Case) -> tuple[dict[str, int], dict[str, int]]:
    """(element counts of the differentiated tensors the step reads: parameters and initial-carry
    leaves with grad; element counts of the tensors whose gradients a backward computes upstream of
    the loop: parameters the prologue reads, xs when differentiated, and the prologue's output
    xs' when anything upstream is), found by running the numpy prologue and one step. A model of
    several recurrences (Model.forward) has no single body: ({}, {})."""
    from rnnbench.ops import numpy_ops

    ops = numpy_ops()
    upstream: dict[str, int] = {}
    if model.forward is not None:
        return {}, upstream
    x0 = None
    if case.xs is not None:
        xs = case.xs
        if model.prologue is not None:
            reads = _Reads(case.params)
            xs = model.prologue(ops, reads, case.xs)
            upstream.update({p: int(np.size(case.params[p])) for p in reads.read})
        if case.xs_requires_grad:
            upstream["xs"] = int(np.size(case.xs))
        if upstream and model.prologue is not None:
            upstream["xs'"] = int(np.size(xs))
        x0 = xs[0]
    reads = _Reads(case.params)
    model.step(ops, reads, tuple(case.carry0), x0)
    body = {p: int(np.size(case.params[p])) for p in reads.read}
    body.update(
        {
            f"carry0.{n}": int(np.size(c))
            for n, c, g in zip(model.carry_names, case.carry0, case.carry0_requires_grad)
            if g
        }
    )
    return body, upstream


def recurrence_carries(model: Model, case: Case) -> list[tuple]:
    """The initial carry of each recurrence the model runs (one for a single recurrence; one per
    layer or direction of a Model.forward), found by running the numpy forward."""
    from rnnbench.model import loop_recur, run_forward
    from rnnbench.ops import numpy_ops

    if model.forward is None:
        return [tuple(case.carry0)]
    ops, seen = numpy_ops(), []
    loop = loop_recur(ops)

    def recording(step, params, carry0, xs, length):
        seen.append(tuple(carry0))
        return loop(step, params, carry0, xs, length)

    run_forward(ops, model, case.params, case.carry0, case.xs, case.length, recording)
    return seen


def expanded_carry_cotangents(model: Model, case: Case) -> list[int]:
    """For each final-carry leaf the loss seeds with an expanded cotangent (a gradient with a stride-0
    dim, as torch's backward of an unweighted sum gives: expand of a scalar), the largest size of
    its stride-0 dims (1 for a one-element leaf); leaves with other cotangents are left out.
    Runs the numpy forward, then the model's loss in eager torch on the final carry as leaves, and
    reads the strides of each leaf's incoming gradient. A sum that inductor alone turns into an
    expand (e.g. of c * ones_like(c)) is not seen here."""
    import torch

    from rnnbench.model import rollout
    from rnnbench.ops import forward_pass, numpy_ops, torch_ops

    with forward_pass():
        ys, carry = rollout(numpy_ops(), model, case.params, case.carry0, case.xs, case.length)
    leaves = [torch.tensor(np.asarray(c, dtype=np.float64), requires_grad=True) for c in carry]
    expanded: list[int] = []

    def seen(grad) -> None:
        lanes = [n for stride, n in zip(grad.stride(), grad.shape) if stride == 0]
        if lanes:
            expanded.append(max(lanes))

    for leaf in leaves:
        leaf.register_hook(seen)
    consts = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in case.consts.items()}
    loss = model.loss(torch_ops(), consts, torch.tensor(np.asarray(ys, dtype=np.float64)), tuple(leaves))
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        loss.backward()
    return expanded


def _step_graph(model: Model, case: Case) -> tuple[bool, bool, bool]:
    """One eager torch step at the case's values, with every carry leaf and parameter requiring
    grad and x when xs' does (what torch_xla's scan traces with grad; parameters travel in the carry
    in torch_xla_scan): (some output has no grad_fn; some carry leaf reaches no output that has
    one; some output is a parameter tensor itself). A model of several recurrences (Model.forward)
    has no single body: all False."""
    import torch

    from rnnbench.ops import numpy_ops, torch_ops

    if model.forward is not None:
        return False, False, False

    def t(a, grad: bool):
        return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)

    x = None
    if case.xs is not None:
        xs = case.xs if model.prologue is None else model.prologue(numpy_ops(), case.params, case.xs)
        x = t(np.asarray(xs)[0], case.xs_requires_grad or (model.prologue is not None and bool(case.params)))
    carry = tuple(t(c, True) for c in case.carry0)
    params = {k: t(v, True) for k, v in case.params.items()}
    new, y = model.step(torch_ops(), params, carry, x)
    outputs = [o for o in (*new, y) if isinstance(o, torch.Tensor)]
    returns_param = any(o is p for o in outputs for p in params.values())
    with_grad = [o for o in outputs if o.requires_grad]
    grads = (
        torch.autograd.grad(with_grad, carry, [torch.ones_like(o) for o in with_grad], allow_unused=True)
        if with_grad
        else [None] * len(carry)
    )
    return len(with_grad) < len(outputs), any(g is None for g in grads), returns_param


def _step_gradient_returned_twice(model: Model, case: Case) -> bool:
    """One eager torch step, carry leaves and x differentiated as the case (or its prologue) does: do two of
    their gradients share storage that no output cotangent has? Several recurrences: False."""
    import torch

    from rnnbench.ops import numpy_ops, torch_ops

    if model.forward is not None:
        return False
    wants = case.carry0_requires_grad or (False,) * len(case.carry0)
    leaves = [torch.tensor(np.asarray(c, dtype=np.float64), requires_grad=bool(g)) for c, g in zip(case.carry0, wants)]
    xs = case.xs if model.prologue is None or case.xs is None else model.prologue(numpy_ops(), case.params, case.xs)
    grad = bool(case.xs_requires_grad or (model.prologue is not None and case.params))
    x = None if xs is None else torch.tensor(np.asarray(xs, dtype=np.float64)[0], requires_grad=grad)
    params = {k: torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for k, v in case.params.items()}
    new, y = model.step(torch_ops(), params, tuple(leaves), x)
    outputs = [o for o in (*new, y) if isinstance(o, torch.Tensor) and o.requires_grad]
    inputs = [t for t in (*leaves, x) if t is not None and t.requires_grad]
    if len(inputs) < 2 or not outputs:
        return False
    cotangents = [torch.ones_like(o) for o in outputs]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    handed_in = {c.untyped_storage().data_ptr() for c in cotangents}
    storages = [g.untyped_storage().data_ptr() for g in grads if g is not None and g.numel()]
    return any(s not in handed_in and storages.count(s) >= 2 for s in storages)


def _body_grad_numel_shared_upstream(model: Model, case: Case) -> bool:
    body, upstream = differentiated_sizes(model, case)
    return any(nb == nu for b, nb in body.items() for u, nu in upstream.items() if b != u)


@dataclass(frozen=True)
class KnownIssue:
    id: str
    title: str
    upstream: str | None
    symptom: str
    drivers: tuple[str, ...]
    versions: Mapping[str, str]
    conditions: tuple[str, ...]
    statuses: tuple[str, ...]
    match: str | None = None
    models: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    catalog: str = ""  # where docs/bugs.md describes it
    order: int = 1  # 1: the gradient check (rows); 2: the second-order check (check/second_order.py)
    certain: bool = True  # False: shows on some covered cases only (an ok row stays ok)
    witnesses: tuple[
        Mapping[str, Any], ...
    ] = ()  # rows ({"model", "dtype"}, optional "versions") on which it must reproduce
    losses: tuple[str, ...] | None = None  # loss forms (rnnbench.losses) it shows under; None: any
    upstream_match: str | None = None  # with `upstream`: why that report is this bug (op, symptom, versions)
    # where docs/upstream/<id>.py reproduces, when narrower than `versions` (its smallest case misses a
    # version where only a registered witness shows the bug); None: the same as `versions`
    repro_versions: dict[str, str] | None = None

    def covers(
        self, driver: str, model: Model, case: Case, dtype: str, versions: Callable[[str], str | None], order: int = 1
    ) -> bool:
        """True when this bug is expected to show on this row's check of derivative `order`."""
        if driver not in self.drivers or order != self.order:
            return False
        if self.models is not None and model.name not in self.models:
            return False
        if self.dtypes is not None and dtype not in self.dtypes:
            return False
        if self.losses is not None and case.loss not in self.losses:
            return False
        for package, spec in self.versions.items():
            installed = versions(package)
            if installed is None or not version_matches(installed, spec):
                return False
        return all(CONDITIONS[c](model, case) for c in self.conditions)

    def reproduced_by(self, status: str, report: str) -> bool:
        """True when a row's failure is this bug's (status, and the report matches)."""
        return status in self.statuses and (self.match is None or re.search(self.match, report) is not None)


class RegistryError(ValueError):
    """known_issues.json does not follow its format."""


def parse(data: Mapping) -> tuple[KnownIssue, ...]:
    """Validated entries from the JSON document (see its "format" block)."""
    issues, seen = [], set()
    for raw in data.get("issues", []):
        try:
            affects, produces = raw["affects"], raw["produces"]
            issue = KnownIssue(
                id=raw["id"],
                title=raw["title"],
                upstream=raw["upstream"],
                symptom=raw["symptom"],
                drivers=tuple(affects["drivers"]),
                versions=dict(affects.get("versions", {})),
                conditions=tuple(affects.get("conditions", ())),
                statuses=tuple(produces["statuses"]),
                match=produces.get("match"),
                models=tuple(affects["models"]) if affects.get("models") is not None else None,
                dtypes=tuple(affects["dtypes"]) if affects.get("dtypes") is not None else None,
                catalog=raw.get("catalog", ""),
                order=int(affects.get("order", 1)),
                certain=bool(produces.get("certain", True)),
                witnesses=tuple(dict(w) for w in raw.get("witnesses", ())),
                losses=tuple(affects["losses"]) if affects.get("losses") is not None else None,
                upstream_match=raw.get("upstream_match"),
                repro_versions=dict(raw["repro_versions"]) if "repro_versions" in raw else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RegistryError(f"known issue {raw.get('id', '?')!r}: missing or malformed field {exc}") from None
        if issue.id in seen:
            raise RegistryError(f"known issue id {issue.id!r} appears twice")
        seen.add(issue.id)
        unknown = [c for c in issue.conditions if c not in CONDITIONS]
        unknown += [f"loss {n!r}" for n in issue.losses or () if n not in loss_forms.NAMES]
        unknown += [
            f"witness loss {w['loss']!r}" for w in issue.witnesses if w.get("loss", "model") not in loss_forms.NAMES
        ]
        # first-order entries produce row statuses, second-order ones the hvp_* statuses only
        bad_status = [s for s in issue.statuses if s not in STATUSES or s.startswith("hvp_") != (issue.order == 2)]
        if unknown or bad_status or not issue.drivers or not issue.statuses or issue.order not in (1, 2):
            raise RegistryError(
                f"known issue {issue.id!r}: unknown conditions {unknown} / statuses {bad_status}, "
                "no drivers / statuses, or affects.order not 1 or 2"
            )
        if bool(issue.upstream) != bool(issue.upstream_match):
            raise RegistryError(
                f"known issue {issue.id!r}: `upstream` and `upstream_match` (the evidence that the "
                "upstream report is this bug) come together"
            )
        if not issue.certain and not issue.witnesses:
            raise RegistryError(
                f"known issue {issue.id!r}: an entry that is not certain needs witnesses "
                "(rows on which it must reproduce), or nothing would notice it is fixed"
            )
        for spec in issue.versions.values():
            version_matches("0", spec)  # raises on a malformed specifier
        for witness in issue.witnesses:
            extra = set(witness.get("versions", {})) - set(issue.versions)
            if extra:
                raise RegistryError(
                    f"known issue {issue.id!r}: a witness names versions of {sorted(extra)}, "
                    "which the entry's affects.versions do not"
                )
            for spec in witness.get("versions", {}).values():
                version_matches("0", spec)
        issues.append(issue)
    return tuple(issues)


@cache
def registry() -> tuple[KnownIssue, ...]:
    return parse(json.loads(REGISTRY_PATH.read_text()))


def installed_version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def covering(
    driver: str,
    model: Model,
    case: Case,
    dtype: str,
    versions: Callable[[str], str | None] = installed_version,
    issues: Sequence[KnownIssue] | None = None,
    order: int = 1,
) -> list[KnownIssue]:
    """The entries expected to show on this row's check of derivative `order`, in registry order."""
    return [
        i for i in (registry() if issues is None else issues) if i.covers(driver, model, case, dtype, versions, order)
    ]


def classify(status: str, report: str, expected: Sequence[KnownIssue]) -> tuple[str, str]:
    """(final status, note) for a row with raw `status` and `report`, given the entries that cover it."""
    if not expected or status not in STATUSES and status != Status.OK:
        return status, ""
    for issue in expected:
        if issue.reproduced_by(status, report):
            return known(
                issue.id
            ), f"known upstream issue {issue.id}: {issue.title} (upstream: {issue.upstream or 'not known'})"
    if status == Status.OK:
        stale = [i for i in expected if i.certain]
        if not stale:  # the symptom shows on some covered cases only: right here is not "fixed"
            ids = ", ".join(i.id for i in expected)
            return status, (
                f"covered by {ids}, which shows on some covered cases only; the gradients agree on this one"
            )
        return fixed(stale[0].id), (
            f"KNOWN ISSUE NO LONGER REPRODUCES: {', '.join(i.id for i in stale)} covers this row but it is ok; "
            "narrow or remove the entry in known_issues.json"
        )
    ids = ", ".join(i.id for i in expected)
    return status, f"expected known issue(s) {ids}, but this failure does not match them"


class KnownIssueReproduced(Exception):
    """Raised by a test where a registered upstream bug showed exactly as registered. The tests mark
    such cases pytest.mark.xfail(strict=True, raises=KnownIssueReproduced): any other failure still
    fails, and a pass (the bug is gone) fails as a strict XPASS."""


def expect_ok(status: str, report: str) -> None:
    """For tests: raise KnownIssueReproduced on known_issue:<id>, else assert the row is ok."""
    if is_known(status):
        raise KnownIssueReproduced(f"{status}\n{report}")
    assert status == Status.OK, f"{status}\n{report}"


# ---- version specifiers ------------------------------------------------------------------------
_CLAUSE = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*([0-9]+(?:\.[0-9]+)*)(\.\*)?\s*$")


def _release(version: str) -> tuple[int, ...]:
    """(2, 9, 0) from "2.9.0+cu128" / "2.13.0+cpu"; pre-release tails are dropped."""
    m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)*)", version)
    if not m:
        raise RegistryError(f"cannot read version {version!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def version_matches(version: str, spec: str) -> bool:
    """True when `version` satisfies one '|'-separated alternative of `spec`, each a set of
    comma-separated clauses that must all hold (release numbers only): "==2.9.0|==2.13.0" claims
    the two measured versions and nothing between them."""
    return any([_all_clauses_match(version, alternative) for alternative in spec.split("|")])  # all checked


def _all_clauses_match(version: str, spec: str) -> bool:
    have = _release(version)
    for clause in spec.split(","):
        m = _CLAUSE.match(clause)
        if not m:
            raise RegistryError(f"malformed version specifier {spec!r}")
        op, number, wildcard = m.groups()
        want = tuple(int(p) for p in number.split("."))
        if wildcard:
            if op not in ("==", "!="):
                raise RegistryError(f"wildcard only with == or != in {spec!r}")
            equal = have[: len(want)] == want
            ok = equal if op == "==" else not equal
        else:
            n = max(len(have), len(want))
            a, b = have + (0,) * (n - len(have)), want + (0,) * (n - len(want))
            ok = {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[op]
        if not ok:
            return False
    return True
