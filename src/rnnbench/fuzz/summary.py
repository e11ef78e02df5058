"""A fuzz campaign's summary: per driver, how many bodies agreed, failed, were known issues,
errors or undecided, and one line per outcome worth reading."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from rnnbench.fuzz.edges import FIRST_ORDER_PLANTS, parse_plant
from rnnbench.fuzz.grammar import Grammar, body_wrt
from rnnbench.fuzz.outcome import ERRORS, FIRST_ORDER_FAILURES, Outcome, first_order_ok
from rnnbench.status import Status, is_fixed, is_known

COLUMNS = (
    "tried",
    "agree",
    "undecided",
    "mismatch",
    "known",
    "error",
    "hvp_tried",
    "hvp_agree",
    "hvp_mismatch",
    "hvp_known",
    "hvp_error",
    "hvp_ill_cond",
)


@dataclass
class FuzzSummary:
    drivers: list[str]
    bodies: int
    seed: int
    dtype: str
    device: str = "cpu"
    losses: tuple[str, ...] = ("weighted",)  # every body is judged under each
    ill_conditioned: Counter = field(default_factory=Counter)
    outcomes: list[Outcome] = field(default_factory=list)
    grammar: Grammar = field(default_factory=Grammar)
    planted: tuple[str, ...] = ()  # the drivers the grammar's plant makes wrong

    def is_planted(self, o: Outcome) -> bool:
        return bool(self.grammar.plant) and o.driver in self.planted

    def plant_verdicts(self) -> Counter:
        """Planted outcomes as caught (the status says the derivative is wrong), missed (called
        right: a failure of the campaign) or the status they got instead."""
        kind = parse_plant(self.grammar.plant)[0] if self.grammar.plant else ""
        return Counter(plant_verdict(o, kind) for o in self.outcomes if self.is_planted(o))

    @property
    def misses(self) -> list[Outcome]:
        """Planted outcomes called right."""
        kind = parse_plant(self.grammar.plant)[0] if self.grammar.plant else ""
        return [o for o in self.outcomes if self.is_planted(o) and plant_verdict(o, kind) == "missed"]

    def by_op_class(self) -> dict[str, Counter]:
        """Per op class (rnnbench.fuzz.edges' ops a body uses, "smooth" for none), the outcomes'
        first-order statuses and, as "hvp:<status>", their second-order ones; a body counts under
        each class it uses."""
        per: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            for op in sorted(o.body.op_classes()) if o.body is not None else ("?",):
                per[op][str(o.status)] += 1
                if o.hvp_status is not None:
                    per[op][f"hvp:{o.hvp_status}"] += 1
        return dict(sorted(per.items()))

    def counts(self) -> dict[str, Counter]:
        per: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            c = per[o.driver]
            c["tried"] += 1
            if o.status in FIRST_ORDER_FAILURES:
                c["mismatch"] += 1
            elif is_known(o.status):
                c["known"] += 1
            elif o.status in ERRORS:
                c["error"] += 1
            elif o.status == Status.CANNOT_DECIDE:  # the oracle's error bound is wider than the tolerance
                c["undecided"] += 1
            else:  # ok, or a body a registry entry covers that came out right
                c["agree"] += 1
                c["covered_ok"] += is_fixed(o.status)
            if o.hvp_status is None:
                continue
            if o.hvp_status == Status.ILL_CONDITIONED:
                c["hvp_ill_cond"] += 1
                continue
            c["hvp_tried"] += 1
            c[
                {Status.HVP_MISMATCH: "hvp_mismatch", Status.HVP_ERROR: "hvp_error"}.get(o.hvp_status, "")
                or ("hvp_known" if is_known(o.hvp_status) else "hvp_agree")
            ] += 1
        return per

    @property
    def failures(self) -> list[Outcome]:
        """Outcomes the oracle contradicts, but for the planted ones (those must fail: `misses`)."""
        return [o for o in self.outcomes if o.failed and not self.is_planted(o)]

    def format(self) -> str:
        counts = self.counts()
        skipped = sum(self.ill_conditioned.values())
        lines = [
            f"fuzz: {self.bodies} bodies x {len(self.losses)} losses ({', '.join(self.losses)}; seed {self.seed}, "
            f"{self.dtype}, {self.device}); {skipped} cases skipped as ill-conditioned"
            + (
                " (" + ", ".join(f"{n} {why}" for why, n in self.ill_conditioned.most_common()) + ")" if skipped else ""
            ),
            f"{'driver':<26}" + "".join(f"{c:>13}" for c in COLUMNS),
        ]
        for d in self.drivers:
            lines.append(f"{d:<26}" + "".join(f"{counts[d][c]:>13}" for c in COLUMNS))
        covered = {d: counts[d]["covered_ok"] for d in self.drivers if counts[d]["covered_ok"]}
        if covered:
            lines.append(f"(agree includes bodies a known-issue entry covers that came out right: {covered})")
        lines += self._edge_lines()
        failures = self.failures
        lines.append(
            f"\n{len(failures)} mismatches (gradients the oracle contradicts, no registry entry)"
            + (":" if failures else "")
        )
        lines += [_describe(o) for o in failures]
        known = [o for o in self.outcomes if o.known and o.minimal is not None]
        if known:
            lines.append("\nknown upstream issues reproduced (one minimal body each):")
            lines += [_describe(o) for o in known]
        undecided = [o for o in self.outcomes if o.status == Status.CANNOT_DECIDE]
        if undecided:
            lines.append(
                f"\n{len(undecided)} outcomes the check cannot decide (beyond the tolerance, but within the "
                "oracle's error bound or what rounding alone does; not failures), the first:"
            )
            lines.append(_describe(undecided[0]))
        errors = [o for o in self.outcomes if o.errored]
        if errors:
            lines.append(f"\n{len(errors)} driver errors (the framework raised; not gradient mismatches):")
            lines += [
                _describe(o) for o in errors if o.minimal is not None or o.status in (Status.CRASH, Status.TIMEOUT)
            ]
        return "\n".join(lines)

    def _edge_lines(self) -> list[str]:
        """The grammar, the statuses per op class and the plant's verdicts (edge or planted runs)."""
        if self.grammar == Grammar():
            return []
        g = self.grammar
        lines = [f"\ngrammar {g.name}, snap rate {g.snap_rate:g}" + (f", plant {g.plant}" if g.plant else "")]
        per = self.by_op_class()
        statuses = sorted({s for c in per.values() for s in c})
        from tabulate import tabulate  # an extra ([charts]): a fuzz run in an environment without it still runs

        lines.append(tabulate([[op, *(c[s] for s in statuses)] for op, c in per.items()], ["op class", *statuses]))
        if g.plant:
            lines.append(
                f"planted ({', '.join(self.planted)}): "
                + ", ".join(f"{n} {v}" for v, n in sorted(self.plant_verdicts().items()))
                + f"; {len(self.misses)} missed"
            )
            lines += [_describe(o) for o in self.misses]
        return lines


def plant_verdict(o: Outcome, kind: str) -> str:
    """caught / missed / what else a planted outcome got (kind "grad", "jvp", "func": judged at first
    order, in the campaign's differentiation mode; "hvp": by its H v)."""
    if kind in FIRST_ORDER_PLANTS:
        if o.status in FIRST_ORDER_FAILURES:
            return "caught"
        return "missed" if first_order_ok(o.status) else str(o.status)
    if o.hvp_status == Status.HVP_MISMATCH:
        return "caught"
    if o.hvp_status is None:
        return "H v not checked" if first_order_ok(o.status) else f"first order {o.status}"
    return "missed" if first_order_ok(o.hvp_status) else str(o.hvp_status)


def _describe(o: Outcome) -> str:
    b = o.minimal or o.body
    under = f" under loss {b.loss}" if b is not None else ""
    head = f"\n== case {o.index}{under} on {o.driver}: {o.status}" + (
        f", second order {o.hvp_status}" if o.hvp_status not in (None, Status.OK) else ""
    )
    parts = [head]
    if b is not None:
        wrt = body_wrt(b)  # the effective flags: a leaf that cannot reach the loss is not differentiated
        grad = [f"carry0.{c}" in wrt for c in b.carry_names]
        minimal = "minimal " if o.minimal is not None else ""
        parts.append(
            f"{minimal}body (T={b.length}, n={b.n}, xs={'yes' if b.has_xs else 'no'}, "
            f"carry0 requires grad={grad}):\n{b.source().rstrip()}"
        )
    parts += [s.rstrip() for s in (o.report, o.localization) if s.strip()]
    if o.repro:
        parts.append(f"repro: {o.repro}")
    return "\n".join(parts)
