"""A fuzz campaign: every parameter of one fuzz run at one dtype (Campaign, built once where the
run is asked for), and its records: one per (body, driver, dtype) outcome and one per
ill-conditioned body, the summary rebuilt from them, and what a --resume need not run again."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rnnbench import record, registry, results_file
from rnnbench.errors import InputError
from rnnbench.fuzz import linear
from rnnbench.fuzz.edges import parse_plant
from rnnbench.fuzz.grammar import EXAMPLES, Body, Grammar
from rnnbench.fuzz.outcome import Outcome, kind_of
from rnnbench.fuzz.summary import FuzzSummary
from rnnbench.machine import environments
from rnnbench.modes import FUNC, JVP, PER_EXAMPLE, VJP
from rnnbench.status import Status

ILL_DRIVER = "-"  # the driver of an ill-conditioned body's record: the numpy forward decided, for every driver


@dataclass(frozen=True, kw_only=True)
class Campaign:
    """One fuzz run at one dtype: bodies linear.body_for(seed, 0 .. cases * len(losses) - 1) on
    `drivers` (names), and as records. Each (case, driver) outcome is one record, each
    ill-conditioned case one (driver "-", status ill_conditioned, with the reason): model
    "fuzz:<seed>:<body>", loss_form the case's loss, sizes T and n, the body's fields and source
    (enough to rebuild the case), status (first order), hvp_status, report, and where present the
    minimal body, localization_report and repro; identity fields as rnnbench.record.identity.

    second_order: check H v too (float64 only); grammar: the body stream (smooth or edge, the snap
    rate, a plant; rnnbench.fuzz.grammar.Grammar); shrink_per_kind: failures shrunk per (driver,
    status); repro_dir: where a shrunk failure's standalone repro goes (None: none written);
    timeout_s: per (body, driver) before its worker is killed; workers: drivers run at once on this
    machine (without another executor). settings: what besides a record's row key determines its
    result (its fingerprint; --resume refuses a file recorded with other settings), fixed when the
    campaign is built, so records written on other machines carry this one's."""

    cases: int
    seed: int
    drivers: tuple[str, ...]
    dtype: str = "float64"
    device: str = "cpu"
    losses: tuple[str, ...] = ("weighted",)
    second_order: bool = True
    shrink_per_kind: int = 1
    repro_dir: Path | None = None
    timeout_s: float = 300.0
    workers: int = 1
    grammar: Grammar = Grammar()
    mode: str = VJP  # the differentiation mode every outcome is checked in (rnnbench.modes; H v in vjp only)
    settings: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # frozen: the sequences a caller passes are kept as tuples, the settings computed once
        object.__setattr__(self, "drivers", tuple(self.drivers))
        object.__setattr__(self, "losses", tuple(self.losses))
        settings = {
            "seed": self.seed,
            "second_order": self.second_order,
            "shrink": self.shrink_per_kind,
            "device": self.device,
            "losses": list(self.losses),
            "timeout": self.timeout_s,
            "versions": dict(environments.package_versions(environments.current())),
        }
        if self.mode != VJP:  # a vjp campaign's settings stay those of its records from before modes
            settings["mode"] = self.mode
        if self.grammar != Grammar():  # the smooth stream's settings stay those of its earlier records
            settings["grammar"] = dataclasses.asdict(self.grammar)
        object.__setattr__(self, "settings", settings)

    @property
    def judged(self) -> int:
        return self.cases * len(self.losses)

    def body(self, index: int) -> Body:
        body = linear.body_for(self.seed, index, self.losses, self.grammar)
        # per_example judges each example of a batch: the same body on EXAMPLES examples (example 0's data its own)
        return dataclasses.replace(body, examples=EXAMPLES) if self.mode == PER_EXAMPLE else body

    def identity(self, index: int, driver: str, body: Body | None = None) -> dict[str, Any]:
        body = body or self.body(index)
        rec = record.identity(
            model=f"fuzz:{self.seed}:{index // len(self.losses)}",
            driver=driver,
            **_driver_identity(driver),
            dtype=self.dtype,
            device=self.device,
            sizes={"T": body.length, "n": body.n},
            seed=self.seed,
            loss_form=body.loss,
            settings=self.settings,
            mode=self.mode,
        )
        rec["case"] = index
        return rec

    def _with_body(self, index: int, driver: str, body: Body | None = None) -> dict[str, Any]:
        body = body or self.body(index)
        return {**self.identity(index, driver, body), "body": body_fields(body), "source": body.source()}

    def to_record(self, o: Outcome) -> dict[str, Any]:
        rec = self._with_body(o.index, o.driver, o.body)
        rec.update(
            status=str(o.status), hvp_status=None if o.hvp_status is None else str(o.hvp_status), report=o.report
        )
        if o.oracle_kind:
            rec["oracle_kind"] = o.oracle_kind
        if o.hvp_status is not None:  # what `rnnbench table` shows in its H v column
            rec["hvp"] = {"status": str(o.hvp_status)}
        if o.minimal is not None:
            rec["minimal"] = body_fields(o.minimal)
            rec["minimal_source"] = o.minimal.source()
        if o.localization:
            rec["localization_report"] = o.localization
        if o.repro:
            rec["repro"] = o.repro
        return rec

    def ill_record(self, index: int, reason: str) -> dict[str, Any]:
        rec = self._with_body(index, ILL_DRIVER)
        rec.update(
            status=str(Status.ILL_CONDITIONED),
            hvp_status=None,
            reason=reason,
            report=f"case {index} skipped as ill-conditioned: {reason}",
        )
        return rec

    def wanted(self) -> list[tuple[tuple, str, dict[str, Any], str]]:
        """Every record this campaign writes, as rnnbench.results_file.resume_plan takes them: per case,
        its ill-conditioned record (written only if it is), then one per driver."""
        out = []
        for index in range(self.judged):
            base = self.identity(index, ILL_DRIVER)
            for driver in (ILL_DRIVER, *self.drivers):  # the key and fingerprint do not read the driver's framework
                rec = {**base, "driver": driver}
                out.append(
                    (
                        record.row_key(rec),
                        record.fingerprint(rec),
                        self.settings,
                        f"{rec['model']}/{driver}/{self.dtype}/{rec['loss_form']}",
                    )
                )
        return out

    def planted_drivers(self) -> tuple[str, ...]:
        """The drivers whose ops namespace the campaign's plant targets (none without a plant)."""
        if not self.grammar.plant:
            return ()
        framework = parse_plant(self.grammar.plant)[1]
        return tuple(d for d in self.drivers if _driver_identity(d)["family"] == framework)  # flax runs jax's ops

    def summary(self, records: Iterable[dict[str, Any]]) -> FuzzSummary:
        """The summary of this campaign's records (from a file, a run, or both): the same as the
        run that wrote them printed, however often it was interrupted and resumed."""
        out = FuzzSummary(
            list(self.drivers),
            bodies=self.cases,
            seed=self.seed,
            dtype=self.dtype,
            device=self.device,
            losses=self.losses,
        )
        out.grammar, out.planted = self.grammar, self.planted_drivers()
        ill: dict[int, str] = {}
        for rec in records:
            if is_ill(rec):
                ill[rec["case"]] = rec.get("reason") or ""
            else:
                out.outcomes.append(outcome_from_record(rec))
        order = {d: i for i, d in enumerate(self.drivers)}
        out.outcomes.sort(key=lambda o: (order.get(o.driver, len(order)), o.index))
        out.ill_conditioned = Counter(reason.split(" for ")[0] for reason in ill.values())
        return out


def check_plant(campaigns: Sequence[Campaign]) -> None:
    """InputError where the campaigns' plant would be planted nowhere it is judged: no selected
    driver runs the planted framework's ops, or (an H v plant) no campaign checks H v on one of
    them (second order on, float64, a driver with a second-order path). Such a run reports
    "0 missed" and passes, which says nothing of the checker."""
    plant = next((c.grammar.plant for c in campaigns if c.grammar.plant), "")
    if not plant:
        return
    kind, framework = parse_plant(plant)
    if kind in (JVP, FUNC, PER_EXAMPLE) and not any(c.mode == kind for c in campaigns):
        raise InputError(
            f"--plant {plant}: judged in {kind} rows, and the campaign checks {campaigns[0].mode}: add --mode {kind}"
        )
    planted = {name for c in campaigns for name in c.planted_drivers()}
    if not planted:
        selected = sorted({name for c in campaigns for name in c.drivers})
        raise InputError(
            f"--plant {plant}: no selected driver runs {framework}'s ops ({', '.join(selected)}), so nothing "
            f"is planted; select one with --drivers"
        )
    checked = [
        name
        for c in campaigns
        if c.second_order and c.dtype == "float64"
        for name in c.planted_drivers()
        if registry.get_driver(name).second_order
    ]
    if kind == "hvp" and not checked:
        why = (
            "--no-second-order"
            if not any(c.second_order for c in campaigns)
            else (
                "second order is checked at float64 only"
                if not any(c.dtype == "float64" for c in campaigns)
                else f"no planted driver has a second-order path ({', '.join(sorted(planted))})"
            )
        )
        raise InputError(f"--plant {plant}: no mode checks H v ({why}), so the plant is never judged")


@functools.cache
def _driver_identity(name: str) -> dict[str, Any]:
    """The driver fields of rnnbench.record.identity for a fuzz record (this environment's)."""
    if name == ILL_DRIVER:
        return {
            "framework": "numpy",
            "family": "numpy",
            "anchor": False,
            "environment": environments.current(),
            "env_label": f"numpy {np.__version__}",
        }
    d = registry.get_driver(name)
    return {
        "framework": d.framework.name,
        "family": d.framework.family,
        "anchor": d.anchor,
        "environment": environments.current(),
        "env_label": d.framework.label(),
    }


def body_fields(body: Body) -> dict[str, Any]:
    """A body as JSON-ready fields (expressions as nested lists): body_from_fields inverts it."""
    return dataclasses.asdict(body)


def body_from_fields(fields: dict[str, Any]) -> Body:
    def tupled(v: Any) -> Any:
        return tuple(tupled(x) for x in v) if isinstance(v, (list, tuple)) else v

    return Body(**{f.name: tupled(fields[f.name]) for f in dataclasses.fields(Body) if f.name in fields})


def is_ill(rec: dict[str, Any]) -> bool:
    return rec["status"] == Status.ILL_CONDITIONED


def outcome_from_record(rec: dict[str, Any]) -> Outcome:
    """The Outcome a fuzz record was written from (Campaign.to_record inverts it)."""
    return Outcome(
        rec["case"],
        driver=rec["driver"],
        status=rec["status"],
        hvp_status=rec.get("hvp_status"),
        report=rec.get("report") or "",
        body=body_from_fields(rec["body"]),
        minimal=body_from_fields(rec["minimal"]) if rec.get("minimal") else None,
        localization=rec.get("localization_report") or "",
        repro=rec.get("repro") or "",
        oracle_kind=rec.get("oracle_kind") or "",
    )


def shrunk_from_records(records: Iterable[dict[str, Any]]) -> Counter:
    """What a worker has shrunk already, per (driver, kind), from the records that carry a minimal
    body: a resumed campaign does not shrink those kinds again."""
    return Counter(
        (rec["driver"], kind_of(rec["status"], rec.get("hvp_status"))) for rec in records if rec.get("minimal")
    )


def resume(
    path: Path, existing: list[dict[str, Any]], campaigns: Sequence[Campaign]
) -> dict[str, list[dict[str, Any]]]:
    """The records of `existing` (a results file given to --resume) that these campaigns need not
    run again, per dtype. Refuses (InputError, naming the difference) a file of another schema or
    rnnbench version, with records of these rows under other settings, or with records of rows
    these campaigns do not have (another --seed, --losses, --drivers, fewer --cases)."""
    wanted = [w for c in campaigns for w in c.wanted()]
    todo = set(results_file.resume_plan(path, existing, wanted))
    results_file.refuse_other_rows(path, existing, wanted, campaigns[0].settings if campaigns else {})
    done = {(key, fp) for i, (key, fp, _, _) in enumerate(wanted) if i not in todo}
    kept = record.latest_per_row([rec for rec in existing if (record.row_key(rec), rec.get("fingerprint")) in done])
    return {c.dtype: [rec for rec in kept if rec["dtype"] == c.dtype] for c in campaigns}
