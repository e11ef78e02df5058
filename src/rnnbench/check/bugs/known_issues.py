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
from rnnbench.check.bugs.conditions import CONDITIONS
from rnnbench.model import Case, Model
from rnnbench.modes import FIRST_ORDER, VJP
from rnnbench.status import WRONG_GRADIENT, Status, fixed, is_known, known

REGISTRY_PATH = Path(__file__).resolve().parents[2] / "known_issues.json"
STATUSES = tuple(WRONG_GRADIENT | {Status.COMPILE_ERROR, Status.ERROR, Status.HVP_MISMATCH, Status.HVP_ERROR})
"""What an entry may say a bug produces (the rest are not a framework's answer: crash, timeout, ...)."""


def _finite_gradients(result: Any) -> bool:
    """Every gradient the driver returned is finite: a mechanism that moves finite values between
    entries (lane 0's cotangent copied to every lane) cannot make a NaN or an infinity."""
    grads = getattr(result, "grads", None) or {}
    return all(g is None or bool(np.all(np.isfinite(np.asarray(g, dtype=np.float64)))) for g in grads.values())


PREDICTIONS: Mapping[str, Callable[[Any], bool]] = {"finite_gradients": _finite_gradients}
"""What an entry's mechanism predicts about the wrong values (produces.predicts): a failure that
contradicts it is another failure, whatever conditions hold."""


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
    order: int = 1  # 1: the gradient check (rows); 2: the second-order check (check/verdicts/second_order.py)
    certain: bool = True  # False: shows on some covered cases only (an ok row stays ok)
    witnesses: tuple[
        Mapping[str, Any], ...
    ] = ()  # rows ({"model", "dtype"}, optional "versions") on which it must reproduce
    losses: tuple[str, ...] | None = None  # loss forms (rnnbench.losses) it shows under; None: any
    upstream_match: str | None = None  # with `upstream`: why that report is this bug (op, symptom, versions)
    # where docs/upstream/<id>.py reproduces, when narrower than `versions` (its smallest case misses a
    # version where only a registered witness shows the bug); None: the same as `versions`
    repro_versions: dict[str, str] | None = None
    predicts: tuple[str, ...] = ()  # names in PREDICTIONS: what the mechanism says the wrong values look like
    # the first-order differentiation modes (rnnbench.modes) whose rows it shows on: vjp unless the entry says
    # more, since a bug verified through one road says nothing of another (forward mode has its own rules)
    modes: tuple[str, ...] = (VJP,)

    def covers(
        self,
        driver: str,
        model: Model,
        case: Case,
        *,
        dtype: str,
        versions: Callable[[str], str | None],
        order: int = 1,
        mode: str = VJP,
    ) -> bool:
        """True when this bug is expected to show on this row's check of derivative `order`, in
        differentiation mode `mode` (order 1; H v is checked in vjp rows only)."""
        if driver not in self.drivers or order != self.order:
            return False
        if order == 1 and mode not in self.modes:
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
        return all(CONDITIONS[c](model, case, dtype) for c in self.conditions)

    def reproduced_by(self, status: str, report: str, result: Any = None) -> bool:
        """True when a row's failure is this bug's: its status, the report matches, and the wrong
        values are ones the mechanism can produce (`result`, the check with its gradients, where given)."""
        return (
            status in self.statuses
            and (self.match is None or re.search(self.match, report) is not None)
            and (result is None or all(PREDICTIONS[p](result) for p in self.predicts))
        )


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
                predicts=tuple(produces.get("predicts", ())),
                modes=tuple(affects.get("modes", (VJP,))),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RegistryError(f"known issue {raw.get('id', '?')!r}: missing or malformed field {exc}") from None
        if issue.id in seen:
            raise RegistryError(f"known issue id {issue.id!r} appears twice")
        seen.add(issue.id)
        unknown = [c for c in issue.conditions if c not in CONDITIONS]
        unknown += [f"prediction {p!r}" for p in issue.predicts if p not in PREDICTIONS]
        unknown += [f"mode {m!r}" for m in issue.modes if m not in FIRST_ORDER]
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


@cache  # a process's installed packages do not change while it runs; reading METADATA is slow
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
    *,
    dtype: str,
    versions: Callable[[str], str | None] = installed_version,
    issues: Sequence[KnownIssue] | None = None,
    order: int = 1,
    mode: str = VJP,
) -> list[KnownIssue]:
    """The entries expected to show on this row's check of derivative `order` in differentiation
    mode `mode`, in registry order."""
    return [
        i
        for i in (registry() if issues is None else issues)
        if i.covers(driver, model, case, dtype=dtype, versions=versions, order=order, mode=mode)
    ]


def classify(status: str, report: str, expected: Sequence[KnownIssue], result: Any = None) -> tuple[str, str]:
    """(final status, note) for a row with raw `status` and `report`, given the entries that cover it;
    `result` (the check, with the driver's gradients) lets an entry's predictions be tested."""
    if not expected or status not in STATUSES and status != Status.OK:
        return status, ""
    for issue in expected:
        if issue.reproduced_by(status, report, result):
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
