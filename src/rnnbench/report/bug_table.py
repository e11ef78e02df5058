"""The bug x version table (`rnnbench versions`): every registered known issue and every bug class
of docs/bugs.md, run in every environment of the framework-version matrix
(src/rnnbench/environments.toml), and for each bug the versions where it reproduces.

What runs (`probes`; rnnbench.planning.bug_versions.probe_jobs makes them rows), as plain rows through
the ordinary runner (`--no-time`):
- a registered issue: its witnesses on each driver it names; an issue without witnesses, the
  first PROBES_PER_DRIVER registered models (registry order) its drivers, models, dtypes, losses
  and conditions cover, its versions set aside (the table asks where it shows, not where the
  registry says it does);
- a bug class (rnnbench.suites.BUG_CLASSES): its models on its drivers, where the driver can run them.

A row reproduces an issue when its raw status and report match what the issue produces (the
raw status, before the registry renamed it: KnownIssue.reproduced_by); a row's version is the one
its own worker recorded. The registry's `affects.versions` and `measured_on` must agree with this
table on every version it measured (tests/test_known_issues.py checks the committed table)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from rnnbench import record, registry
from rnnbench.check.bugs import known_issues
from rnnbench.losses import with_loss
from rnnbench.model import BY_PRECISION
from rnnbench.report.escape import md_cell
from rnnbench.status import Status
from rnnbench.suites import BUG_CLASSES

PROBES_PER_DRIVER = 2


@dataclasses.dataclass(frozen=True)
class Probe:
    bug: str  # an issue id or a class id
    model: str
    driver: str
    dtype: str
    loss: str = "model"
    sizes: tuple[tuple[str, int], ...] = ()
    order: int = 1
    witness: int | None = None  # the index of the issue's witness this probe runs


def _covered(issue: known_issues.KnownIssue, driver_name: str) -> list[Probe]:
    """The first PROBES_PER_DRIVER models the issue covers on `driver_name`, versions set aside."""
    driver = registry.get_driver(driver_name)
    versionless = dataclasses.replace(issue, versions={})
    loss = issue.losses[0] if issue.losses else "model"
    found = []
    for model in registry.models().values():
        if driver.supports(model) is not None:
            continue
        dtype = next((d for d in (issue.dtypes or BY_PRECISION) if d in driver.dtypes), None)  # the most precise
        if dtype is None:
            continue
        m, case = with_loss(model, model.make_case(model.sizes_with_defaults({}), 0), loss)
        if versionless.covers(
            driver_name, m, case.rounded_to(dtype), dtype=dtype, versions=lambda package: None, order=issue.order
        ):
            found.append(
                Probe(
                    issue.id, model=model.name, driver=driver_name, dtype=dtype, loss=loss, sizes=(), order=issue.order
                )
            )
            if len(found) == PROBES_PER_DRIVER:
                break
    return found


def probes() -> list[Probe]:
    out: list[Probe] = []
    for issue in known_issues.registry():
        for driver in issue.drivers:
            if issue.witnesses:
                out += [
                    Probe(
                        issue.id,
                        model=w["model"],
                        driver=driver,
                        dtype=w["dtype"],
                        loss=w.get("loss", "model"),
                        sizes=tuple(sorted(w.get("sizes", {}).items())),
                        order=issue.order,
                        witness=k,
                    )
                    for k, w in enumerate(issue.witnesses)
                    if registry.get_driver(driver).supports(registry.get_model(w["model"])) is None
                ]
            else:
                out += _covered(issue, driver)
    for cls in BUG_CLASSES:
        drivers = cls.drivers or tuple(
            d.name for d in registry.drivers().values() if d.suite == "core" and not d.anchor
        )
        for model in cls.models:
            for driver in drivers:
                if (
                    registry.get_driver(driver).supports(registry.get_model(model)) is None
                    and cls.dtype in registry.get_driver(driver).dtypes
                ):
                    out.append(Probe(cls.id, model, driver, cls.dtype, order=cls.order))
    return out


def version_of(rec: dict[str, Any], package: str) -> str | None:
    """The version of `package` the row ran on (its worker's record), local tags dropped."""
    environment = rec.get("environment")
    v = ((environment if isinstance(environment, dict) else {}).get("versions") or {}).get(package)
    return v.split("+")[0] if isinstance(v, str) else None


def _framework_package(driver_name: str) -> str:
    """The package a class row's column is named by: its framework's family (torch for torch_xla
    rows, which run on torch 2.9.0; jax for flax rows)."""
    return registry.get_driver(driver_name).framework.family


def _raw(rec: dict[str, Any], order: int) -> tuple[str, str]:
    """The row's raw (status, report) at derivative `order`: for order 2 the first order's failure
    if it failed (no H v was checked), else the H v check's; a driver without a second-order path
    (unsupported, skipped) counts by its first order."""
    first = rec.get("raw_status") or rec.get("status", ""), rec.get("report") or ""
    if order == 1 or first[0] != Status.OK:
        return first
    hvp = rec.get("hvp") or {}
    status = hvp.get("raw_status") or hvp.get("status") or ""
    return (status, hvp.get("report") or "") if status not in (Status.UNSUPPORTED, Status.SKIPPED, "") else first


def _matches(probe: Probe, rec: dict[str, Any]) -> bool:
    return (rec["model"], rec["driver"], rec["dtype"], rec.get("loss_form", "model")) == (
        probe.model,
        probe.driver,
        probe.dtype,
        probe.loss,
    ) and all(rec["sizes"].get(k) == v for k, v in probe.sizes)


def _also_explained_by(
    issue: known_issues.KnownIssue, rec: dict[str, Any], status: str, *, report: str, absent: set[tuple[str, str]]
) -> list[str]:
    """Other registered issues whose scope (versions set aside) covers this row and whose symptom
    the row shows too, unless the table measured that issue absent on this row's version
    (`absent`: (issue id, version) where its probe rows were ok and none reproduced it): then the
    row cannot tell which bug it shows ("ambiguous")."""
    model = registry.get_model(rec["model"])
    m, case = with_loss(
        model,
        model.make_case(model.sizes_with_defaults(rec["sizes"]), rec.get("seed", 0)),
        rec.get("loss_form", "model"),
    )
    case = case.rounded_to(rec["dtype"])
    return [
        other.id
        for other in known_issues.registry()
        if other.id != issue.id
        and other.order == issue.order
        and other.reproduced_by(status, report)
        and (other.id, version_of(rec, next(iter(other.versions), "torch")) or "") not in absent
        and dataclasses.replace(other, versions={}).covers(
            rec["driver"], m, case, dtype=rec["dtype"], versions=lambda p: None, order=other.order
        )
    ]


def witness_outcomes(records: Iterable[dict[str, Any]]) -> dict[tuple[str, int], dict[str, bool]]:
    """(issue id, witness index) -> version -> whether the witness reproduced the issue
    unambiguously on every driver of the issue that ran it there."""
    records = [r for r in records if r.get("status") not in (Status.UNAVAILABLE, Status.SKIPPED)]
    out: dict[tuple[str, int], dict[str, bool]] = defaultdict(dict)
    for (probe, version), verdict in _verdicts(records, _absent(records), per_probe=True).items():
        if probe.witness is not None:
            key = (probe.bug, probe.witness)
            out[key][version] = out[key].get(version, True) and verdict == "reproduces"
    return out


def _absent(records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(issue id, version) where the issue's probe rows came out ok and none showed its symptom."""
    return {
        (bug, version)
        for bug, cells in _verdicts(records, None).items()
        for (_, version), v in cells.items()
        if "ok" in v and "reproduces" not in v
    }


def outcomes(records: Iterable[dict[str, Any]]) -> dict[str, dict[tuple[str, str], list[str]]]:
    """bug id -> (package, version) -> one verdict per probe row: "reproduces"; "ambiguous" (the
    symptom shows, but another registered issue that covers the row, and is not measured absent
    on that version, produces it too); "ok"; "registered issue" (a class row failing as a
    registered issue says); or the raw status of a row that failed another way. Unavailable rows
    are left out."""
    records = [r for r in records if r.get("status") not in (Status.UNAVAILABLE, Status.SKIPPED)]
    return _verdicts(records, _absent(records))


def _verdicts(records: list[dict[str, Any]], absent: set[tuple[str, str]] | None, per_probe: bool = False) -> Any:
    """outcomes, with ambiguity judged against `absent` (None: a first pass that calls every
    symptom "reproduces", to find where each issue is absent). per_probe: {(probe, version):
    verdict} instead. Of several records of one row, the latest counts (a row run again)."""
    records = record.latest_per_row(records)
    issues = {i.id: i for i in known_issues.registry()}
    out: dict[str, dict[tuple[str, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    by_probe: dict[tuple[Probe, str], str] = {}
    for probe in probes():
        issue = issues.get(probe.bug)
        package = next(iter(issue.versions)) if issue and issue.versions else _framework_package(probe.driver)
        for rec in records:
            if not _matches(probe, rec) or (version := version_of(rec, package)) is None:
                continue
            status, report = _raw(rec, probe.order)
            if status == Status.OK:
                verdict = "ok"
            elif issue is None and str(rec.get("status", "")).startswith("known_issue:"):
                verdict = "registered issue"  # a class row failing the way a registered issue says
            elif issue is not None and issue.reproduced_by(status, report):
                ambiguous = absent is not None and _also_explained_by(issue, rec, status, report=report, absent=absent)
                verdict = "ambiguous" if ambiguous else "reproduces"
            else:
                verdict = status
            out[probe.bug][(package, version)].append(verdict)
            by_probe[(probe, version)] = verdict
    return by_probe if per_probe else out


def reproduced_versions(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, bool | None]]]:
    """issue id -> package -> version -> True where some probe row reproduced it unambiguously,
    False where none did and some row came out ok (the symptom could show and did not), None where
    the rows cannot decide (every one ambiguous or failing another way)."""
    out: dict[str, dict[str, dict[str, bool | None]]] = defaultdict(lambda: defaultdict(dict))
    for bug, cells in outcomes(records).items():
        for (package, version), verdicts in cells.items():
            out[bug][package][version] = True if "reproduces" in verdicts else False if "ok" in verdicts else None
    return out


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def _cell(verdicts: list[str]) -> str:
    """ "**reproduces** k/n", "ok k/n" or "cannot decide", then the other verdicts with counts."""
    if not verdicts:
        return "·"
    n, hit, ok = len(verdicts), verdicts.count("reproduces"), verdicts.count("ok")
    text = f"**reproduces** {hit}/{n}" if hit else f"ok {ok}/{n}" if ok else "cannot decide"
    other = sorted({v for v in verdicts if v != "reproduces" and (v != "ok" or hit)})
    return text + (f" ({', '.join(f'{verdicts.count(v)} {v}' for v in other)})" if other else "")


def format_table(records: Iterable[dict[str, Any]]) -> str:
    """Markdown: one row per bug, one column per (package, version) measured."""
    cells = outcomes(list(records))
    columns = sorted({c for bug in cells.values() for c in bug}, key=lambda c: (c[0], _key(c[1])))
    issues = {i.id: i for i in known_issues.registry()}
    lines = [
        "| bug | registry claims | " + " | ".join(md_cell(f"{p} {v}") for p, v in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for bug in [i.id for i in known_issues.registry()] + [c.id for c in BUG_CLASSES]:
        issue = issues.get(bug)
        claims = ", ".join(f"{p} {s}" for p, s in issue.versions.items()).replace("|", " or ") if issue else "(class)"
        row = [md_cell(_cell(cells.get(bug, {}).get(c, []))) for c in columns]
        lines.append(f"| {bug} | {claims} | " + " | ".join(row) + " |")
    return "\n".join(lines)
