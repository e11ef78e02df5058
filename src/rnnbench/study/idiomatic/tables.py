"""The idiomatic comparison's outputs: its records (rnnbench record format) and the markdown page."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rnnbench import record, results_file
from rnnbench.status import Status
from rnnbench.study.idiomatic.candidates import SAME_MECHANISM
from rnnbench.study.idiomatic.plan import DEVICE, DTYPE, SEED, Plan
from rnnbench.study.idiomatic.run import point_key


def _identity(row: dict[str, Any], plan: Plan, settings: dict[str, Any]) -> dict[str, Any]:
    return record.identity(
        model=row["model"],
        driver=row["candidate"],
        framework=row["framework"],
        family=row["framework_family"],
        anchor=not row["family"] == "",
        environment="main",
        env_label=row["env_label"],
        dtype=DTYPE,
        device=DEVICE,
        sizes=row["sizes"],
        seed=SEED,
        settings={"threads": plan.threads, "rounds": plan.rounds, **settings},
    )


def best_by_family(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """{(point, family): the family's fastest ok variant} over the baseline rows."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        if row["family"] and row["status"] == Status.OK and row.get("fwd_bwd"):
            key = (row["point"], row["family"])
            if key not in best or row["fwd_bwd"]["median_ms"] < best[key]["fwd_bwd"]["median_ms"]:
                best[key] = row
    return best


def _measured(row: dict[str, Any]) -> dict[str, Any]:
    """What a record keeps of a candidate's measured row: its verdict, first call, time and load."""
    optional = {k: row.get(k) for k in ("max_rel_error", "fwd_bwd", "loadavg")}
    return {"status": row["status"], "first_call_s": row["first_call_s"], **optional}


def comparison_records(rows: list[dict[str, Any]], plan: Plan) -> list[dict[str, Any]]:
    """One record per (mechanism, baseline family, comparison point)."""
    best = best_by_family(rows)
    wanted = {point_key(m, dict(s)) for m, s in plan.points}
    out = []
    for mech in (r for r in rows if not r["family"] and r["point"] in wanted):
        families = {
            fam: b
            for (pt, fam), b in best.items()
            if pt == mech["point"] and b["framework_family"] == mech["framework_family"]
        }
        overall = min(families.values(), key=lambda b: b["fwd_bwd"]["median_ms"]) if families else None
        for fam, base in sorted(families.items()):
            ok = mech["status"] == Status.OK and mech.get("fwd_bwd")
            variants = [
                {
                    "variant": r["candidate"],
                    "status": r["status"],
                    "max_rel_error": r.get("max_rel_error"),
                    "tolerance": r.get("tolerance"),
                    "first_call_s": r["first_call_s"],
                    "median_ms": (r.get("fwd_bwd") or {}).get("median_ms"),
                }
                for r in rows
                if r["point"] == mech["point"] and r["family"] == fam
            ]
            rec = _identity(mech, plan, {"baseline": fam, "mechanism_settings": mech.get("settings", {})})
            rec.update(
                _measured(mech),
                baseline=fam,
                baseline_variant=base["candidate"],
                baseline_settings=base.get("settings", {}),
                baseline_fwd_bwd=base["fwd_bwd"],
                baseline_max_rel_error=base.get("max_rel_error"),
                baseline_first_call_s=base["first_call_s"],
                baseline_variants=variants,
                best_idiomatic=base is overall,
                ratio=(mech["fwd_bwd"]["median_ms"] / base["fwd_bwd"]["median_ms"]) if ok else None,
            )
            if mech.get("skip_reason") or mech.get("report"):
                rec["reason" if mech.get("skip_reason") else "report"] = mech.get("skip_reason") or mech["report"]
            out.append(rec)
    return out


def sweep_records(rows: list[dict[str, Any]], plan: Plan) -> list[dict[str, Any]]:
    """One record per (candidate, T) of the sweep: mechanisms, and each baseline family by its
    fastest variant at that T (driver "idiomatic: <family>", the variant in settings)."""
    best = best_by_family(rows)
    in_sweep = {point_key(plan.sweep_model, {**dict(plan.sweep_sizes), "T": t}) for t in plan.sweep}
    out = []
    for row in rows:
        if row["point"] not in in_sweep:
            continue
        if row["family"]:
            chosen = best.get((row["point"], row["family"]))
            first = next(r for r in rows if r["point"] == row["point"] and r["family"] == row["family"])
            if chosen is not row and not (chosen is None and first is row):  # no ok variant: the first says why
                continue
            rec = _identity({**row, "candidate": f"idiomatic: {row['family']}"}, plan, {"variant": row["candidate"]})
        else:
            rec = _identity(row, plan, {})
        rec.update(_measured(row), variant_settings=row.get("settings", {}))
        if row.get("skip_reason"):
            rec["reason"] = row["skip_reason"]
        out.append(rec)
    return out


def _fmt_ms(t: dict | None) -> str:
    return "-" if not t else f"{t['median_ms']:.3g} [{t['q1_ms']:.3g}-{t['q3_ms']:.3g}]"


def ratio_table(
    comparison: list[dict[str, Any]],
    sweep: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    *,
    command: str,
    plan: Plan,
) -> str:
    """The markdown page: the ratio table, every baseline variant's time, the sweep, the command."""
    first = comparison[0] if comparison else (sweep[0] if sweep else {})
    machine = first.get("machine", {})
    versions = sorted({f"{r['env_label']}" for r in rows})
    lines = [
        f"# Idiomatic comparison ({time.strftime('%Y-%m-%d')})",
        "",
        "Each rnnbench mechanism's fwd+bwd time over the fastest idiomatic form of the same math in its framework "
        "(every candidate's gradients checked against the oracle first; "
        "method: docs/measuring.md#the-idiomatic-comparison). "
        f"float32, {plan.threads} thread(s), one process per framework, {plan.rounds} interleaved rounds, medians "
        f"[IQR] in ms. Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} "
        f"cores; {', '.join(versions)}.",
        "",
        "```",
        command,
        "```",
        "",
        "## Ratio: mechanism / best idiomatic",
        "",
        "| model | sizes | mechanism | fwd+bwd ms [IQR] | best idiomatic (variant) | its ms | ratio | "
        "same mechanism, idiomatic (variant): ratio | load 1-min start-end |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += _ratio_rows(comparison)
    lines += [
        "",
        "Bold: above 1.1. The same-mechanism column divides by the idiomatic form written with the "
        "mechanism's own construct (SAME_MECHANISM): above 1.1 there is the driver's cost; the ratio column "
        "beyond it is the construct's.",
        "",
        "## Against each baseline family",
        "",
        "| model | sizes | mechanism | " + " | ".join(["family", "variant", "ratio"]) + " |",
        "|---|---|---|---|---|---|",
    ]
    for rec in comparison:
        sizes = " ".join(f"{k}={v}" for k, v in rec["sizes"].items())
        ratio = f"{rec['ratio']:.2f}" if rec["ratio"] is not None else rec["status"]
        lines.append(
            f"| {rec['model']} | {sizes} | {rec['driver']} | {rec['baseline']} | {rec['baseline_variant']} | {ratio} |"
        )
    lines += _candidate_rows(rows)
    lines += [
        "",
        f"## T sweep ({plan.sweep_model}, " + " ".join(f"{k}={v}" for k, v in plan.sweep_sizes if k != "T") + ")",
        "",
        "| candidate | " + " | ".join(f"T={t}" for t in sorted(plan.sweep)) + " |",
        "|---|" + "---|" * len(plan.sweep),
    ]
    lines += _sweep_rows(sweep, plan)
    lines += [
        "",
        "fwd+bwd median ms; `skipped`: over the run's budgets (the records say why). Chart: "
        "the `-tgrowth.png` beside this file; records: the `.jsonl` and `-tgrowth.jsonl` files.",
        "",
    ]
    return "\n".join(lines)


def _ratio_rows(comparison: list[dict[str, Any]]) -> list[str]:
    """The ratio table's rows: each mechanism over its best idiomatic form and its own construct's."""
    lines: list[str] = []
    same = {
        (r["model"], tuple(r["sizes"].items()), r["driver"]): r
        for r in comparison
        if r["baseline"] == SAME_MECHANISM.get(r["driver"])
    }
    for rec in comparison:
        if not rec["best_idiomatic"]:
            continue
        own = same.get((rec["model"], tuple(rec["sizes"].items()), rec["driver"]))
        own_s = (
            "-"
            if own is None
            else (
                f"{own['baseline_variant']}: "
                + (
                    "-"
                    if own["ratio"] is None
                    else (f"**{own['ratio']:.2f}**" if own["ratio"] > 1.1 else f"{own['ratio']:.2f}")
                )
            )
        )
        sizes = " ".join(f"{k}={v}" for k, v in rec["sizes"].items())
        load = rec.get("loadavg") or {}
        load_s = f"{load['start'][0]:.2f}-{load['end'][0]:.2f}" if load else "-"
        ratio = (
            f"**{rec['ratio']:.2f}**"
            if rec["ratio"] is not None and rec["ratio"] > 1.1
            else (f"{rec['ratio']:.2f}" if rec["ratio"] is not None else f"{rec['status']}: {rec.get('reason', '')}")
        )
        lines.append(
            f"| {rec['model']} | {sizes} | {rec['driver']} | {_fmt_ms(rec['fwd_bwd'])} | {rec['baseline']} "
            f"({rec['baseline_variant']}) | {_fmt_ms(rec['baseline_fwd_bwd'])} | {ratio} | {own_s} | {load_s} |"
        )
    return lines


def _candidate_rows(rows: list[dict[str, Any]]) -> list[str]:
    """Every candidate's row: status, error, first call, time."""
    lines: list[str] = []
    lines += [
        "",
        "## Every candidate",
        "",
        "| point | candidate | family | status | max rel err | first call s | fwd+bwd ms [IQR] |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        err = "-" if row.get("max_rel_error") is None else f"{row['max_rel_error']:.1e}"
        first_s = "-" if row["first_call_s"] is None else f"{row['first_call_s']:.2f}"
        status = row["status"] + (f" ({row['skip_reason']})" if row.get("skip_reason") else "")
        lines.append(
            f"| {row['point']} | {row['candidate']} | {row['family'] or 'mechanism'} | {status} | {err} | "
            f"{first_s} | {_fmt_ms(row.get('fwd_bwd'))} |"
        )
    return lines


def _sweep_rows(sweep: list[dict[str, Any]], plan: Plan) -> list[str]:
    """The T sweep's rows: one per candidate, a cell per T."""
    lines: list[str] = []
    by_driver: dict[str, dict[int, dict]] = {}
    for rec in sweep:
        by_driver.setdefault(rec["driver"], {})[rec["sizes"]["T"]] = rec
    for name, per_t in by_driver.items():
        cells = []
        for t in sorted(plan.sweep):
            rec = per_t.get(t)
            cells.append(
                "-" if rec is None else (f"{rec['fwd_bwd']['median_ms']:.3g}" if rec.get("fwd_bwd") else rec["status"])
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(results_file.dumps(r) for r in records))
    os.replace(tmp, path)
