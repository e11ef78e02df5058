"""`rnnbench fuzz`: random step bodies on every driver, gradients (and H v) against the oracle ladder
(rnnbench.fuzz, rnnbench.check.oracles.oracle), one record per (body, driver, dtype) outcome."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnbench import losses, results_file
from rnnbench import modes as differentiation_modes
from rnnbench.cli import options
from rnnbench.planning import plan
from rnnbench.processes import local_pool, parent
from rnnbench.report.escape import terminal
from rnnbench.rows import executors

NAME = "fuzz"
HELP = "random step bodies on every driver, gradients (and H v) vs the oracle ladder (exact dual numbers)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", type=int, default=100, help="number of bodies (default 100)")
    p.add_argument("--seed", type=int, default=0, help="body stream seed (default 0)")
    options.selection(
        p,
        drivers="(default: every eager and jax driver that runs a user step here; name compiled ones to "
        "include them, ~5 s per body each)",
        dtypes=(
            "float64",
            "(from float64, float32: fuzzed one after another; default float64; second order is "
            "checked at float64 only)",
        ),
        losses=(
            ",".join(losses.CHECKED),
            f"every body is judged under (from {', '.join(losses.FORMS)}; default {','.join(losses.CHECKED)})",
        ),
        resume="continue --out: outcomes already recorded there are not run again (same arguments required)",
    )
    p.add_argument(
        "--grammar",
        default="smooth",
        help="smooth (default: tanh, sin, cos, exp, sigmoid, matmul), edge (adds relu, clip, abs, "
        "minimum/maximum, safe sqrt, learned powers, > and ==, log-sigmoid, logsumexp: docs/fuzzing.md) "
        "edge2 (edge's ops plus a layer of dead ReLU units, ties equal to first order, softplus and logaddexp "
        "written with max and abs: its own stream) or linear (c' = decay * c + drive, declared: the "
        "associative-scan drivers run these)",
    )
    p.add_argument(
        "--snap-rate", type=float, default=0.25, help="edge grammar: share of input entries snapped onto kinks/ties"
    )
    p.add_argument(
        "--plant",
        default="",
        help="grad:<framework>, jvp:<framework>, func:<framework>, per_example:<framework> or hvp:<framework> "
        "(torch, jax): a known wrong derivative in that framework's body, judged in reverse mode, forward mode, "
        "torch.func, per-example gradients or H v; every planted outcome must be flagged (a miss fails the run)",
    )
    p.add_argument(
        "--mode",
        help="the differentiation mode every outcome is checked in: vjp (default), jvp, func or per_example "
        "(rnnbench.modes; H v only in vjp; per_example runs each body on a batch of examples); default with "
        "--plant jvp:/func:/per_example:<framework>: that mode",
    )
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--no-second-order", dest="second_order", action="store_false", help="skip the H v check")
    p.add_argument("--shrink", type=int, default=1, help="failures shrunk per (driver, status) (default 1)")
    p.add_argument("--repro-dir", help="write a standalone repro script for each shrunk failure here")
    options.timeout_option(p, 300.0, "a (body, driver)'s worker")
    options.out_option(p, NAME, "one JSON record per (body, driver, dtype) outcome, written as each finishes")
    p.add_argument(
        "--workers",
        type=int,
        help="drivers fuzzed at once on this machine, each in its own worker process "
        "(default: the CPUs rnnbench may use; 1 runs them one after another)",
    )
    options.executor_flags(p)


def fuzz_drivers(value: str | None, dtype: str, device: str = "cpu", grammar: str = "smooth") -> list:
    """rnnbench.planning.plan.fuzz_drivers, asked with a fuzzed body's model (of the linear stream for
    --grammar linear: the associative-scan drivers run only bodies that declare a linear recurrence)."""
    # lazy: cli: --help and bad input answer without importing the fuzzer
    from rnnbench.fuzz import linear
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.grammar import generate

    body = linear.generate(0, 0) if grammar == "linear" else generate(0, 0)
    return plan.fuzz_drivers(value, dtype, device, build(body).model)


@dataclass(frozen=True)
class Checked:
    """The flags checked, as the campaigns take them (the parsed flags themselves stay as given)."""

    dtypes: list[str]
    loss_forms: list[str]
    drivers: dict[str, list]  # {dtype: the drivers fuzzed at it}
    repro_dir: Path | None  # created
    workers: int  # --workers, or the CPUs rnnbench may use
    grammar: Any  # rnnbench.fuzz.grammar.Grammar: --grammar, --snap-rate, --plant


def _checked(args: argparse.Namespace) -> Checked:
    """The flags checked, in the order their errors are reported."""
    options.number("--cases", args.cases, integer=True)
    options.number("--shrink", args.shrink, integer=True, inclusive=True)
    options.number("--timeout", args.timeout, maximum=options.MAX_SECONDS)
    dtypes = plan.names(args.dtypes, ("float64", "float32"), "fuzzing dtype", required=True)
    try:
        loss_forms = losses.parse(args.losses, losses.CHECKED)
    except ValueError as exc:
        raise options.UsageError(str(exc)) from None
    if losses.MODEL_LOSS in loss_forms:
        raise options.UsageError("a fuzzed body has no model loss of its own: choose from " + ", ".join(losses.FORMS))
    if args.device not in plan.DEVICES:
        raise options.UsageError(f"unknown device {args.device!r}; known: {', '.join(plan.DEVICES)}")
    executors.check_executor(args.executor, args.address)
    workers = args.workers
    if workers is None:
        workers = local_pool.usable_cpus()
    elif args.executor == "ray":
        raise options.UsageError("--workers is for the local executor (Ray runs as many chunks as its CPUs hold)")
    else:
        options.number("--workers", args.workers, integer=True)
    drivers = {dtype: fuzz_drivers(args.drivers, dtype, args.device, args.grammar) for dtype in dtypes}
    if not all(drivers.values()):
        raise options.UsageError(
            f"no driver can fuzz here on {args.device} (install a framework: {plan.frameworks_hint()})"
        )
    repro_dir = options.writable_dir(Path(args.repro_dir), "--repro-dir") if args.repro_dir else None
    return Checked(
        dtypes=dtypes,
        loss_forms=loss_forms,
        drivers=drivers,
        repro_dir=repro_dir,
        workers=workers,
        grammar=_grammar(args),
    )


def _grammar(args: argparse.Namespace) -> Any:
    """--grammar, --snap-rate and --plant checked, as one rnnbench.fuzz.grammar.Grammar."""
    # lazy: cli: the grammar's names without the fuzzer's cases
    from rnnbench.fuzz.edges import parse_plant
    from rnnbench.fuzz.grammar import EDGE_STREAMS, GRAMMARS, Grammar

    if args.grammar not in GRAMMARS:
        raise options.UsageError(f"unknown grammar {args.grammar!r}; known: {', '.join(GRAMMARS)}")
    if not 0.0 <= args.snap_rate <= 1.0:
        raise options.UsageError(f"--snap-rate must be within [0, 1], not {args.snap_rate!r}")
    if args.plant:
        try:
            parse_plant(args.plant)
        except ValueError as exc:
            raise options.UsageError(str(exc)) from None
    edge = args.grammar in EDGE_STREAMS  # the grammars whose bodies carry a snap rate
    return Grammar(args.grammar, args.snap_rate if edge else 0.0, args.plant)


def fuzz_mode(given: str | None, plant: str) -> str:
    """--mode checked (a first-order mode of rnnbench.modes), else the mode a jvp / func / per_example
    plant is judged in, else vjp."""
    if given is None:
        kind = plant.partition(":")[0]
        return kind if kind in ("jvp", "func", "per_example") else "vjp"
    if given not in differentiation_modes.FIRST_ORDER:
        raise options.UsageError(
            f"--mode: unknown mode {given!r}; known: {', '.join(differentiation_modes.FIRST_ORDER)}"
        )
    return given


def run(args: argparse.Namespace) -> int:
    checked = _checked(args)
    # lazy: cli: --help and bad input answer without importing the fuzzer
    from rnnbench.fuzz.campaign import Campaign, check_plant, resume
    from rnnbench.fuzz.isolated import fuzz_isolated

    campaigns = [
        Campaign(
            cases=args.cases,
            seed=args.seed,
            drivers=tuple(d.name for d in checked.drivers[dtype]),
            dtype=dtype,
            device=args.device,
            losses=tuple(checked.loss_forms),
            second_order=args.second_order,
            shrink_per_kind=args.shrink,
            repro_dir=checked.repro_dir,
            timeout_s=args.timeout,
            workers=checked.workers,
            grammar=checked.grammar,
            mode=fuzz_mode(args.mode, args.plant),
        )
        for dtype in checked.dtypes
    ]
    check_plant(campaigns)  # a plant judged nowhere would pass as "0 missed"
    out = options.out_path(args.out, NAME, args.resume)
    start = time.time()
    failures = errors = 0
    with (
        executors.executor(args.executor, args.address) as executor,
        results_file.ResultsFile(out, resume=args.resume, kind="fuzz") as results,
    ):
        parent.results_file(out, resumable=True)  # an interruption names the file and how to continue it
        done = resume(out, results.existing, campaigns) if args.resume else {dtype: [] for dtype in checked.dtypes}
        already = sum(map(len, done.values()))
        print(
            f"rnnbench: fuzz -> {out}" + (f" ({already} records already there, not run again)" if already else ""),
            flush=True,
        )
        for campaign in campaigns:
            summary = fuzz_isolated(
                campaign,
                progress=lambda m: print(
                    f"\r{m} ({time.time() - start:.0f} s)   ", end="", file=sys.stderr, flush=True
                ),
                write=results.append,
                done=done[campaign.dtype],
                executor=executor,
            )
            print(file=sys.stderr)
            print(terminal(summary.format(), lines=True))  # resumed records are read, not trusted
            failures += len(summary.failures) + len(summary.misses)
            errors += sum(o.errored for o in summary.outcomes)
        written = results.written
    print(
        f"\nrnnbench fuzz: {failures} mismatches, {errors} driver errors in {time.time() - start:.0f} s; "
        f"{written} records written now" + (f", {already} from before" if already else "") + f"; records in {out}",
        file=sys.stderr,
    )
    return 1 if failures or errors else 0
