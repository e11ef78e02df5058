"""Replay exported bodies through the fuzzer's judging path (fuzz.runner.run_driver, i.e. rows.pair.check_pair)
of whichever rnnbench is on PYTHONPATH: the same bodies judged by two commits.
Usage: PYTHONPATH=<src> python replay.py BODIES.pkl DTYPE OUT.jsonl [START STOP]"""

import dataclasses
import json
import os
import pickle
import sys
import traceback
from types import SimpleNamespace

import numpy as np

from rnnbench import registry
from rnnbench.check.oracle import oracle_grads
from rnnbench.fuzz.cases import LOSS_LIMIT, FuzzCase, compile_step
from rnnbench.fuzz.runner import run_driver
from rnnbench.losses import weighted
from rnnbench.model import Case, Model, reference_loss
from rnnbench.status import OracleKind

items = pickle.load(open(sys.argv[1], "rb"))
dtype, out = sys.argv[2], sys.argv[3]
start, stop = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (0, len(items))
done = set()
if os.path.exists(out):
    done = {json.loads(line)["index"] for line in open(out)}
drivers = [registry.get_driver(d) for d in ("torch_loop", "jax_loop", "jax_lax_scan")]
model_fields = {f.name for f in dataclasses.fields(Model)}
with open(out, "a") as f:
    for item in items[start:stop]:
        if item["index"] in done or item["linear"]:
            continue
        row = {"index": item["index"], "tokens": item["tokens"], "dtype": dtype}
        try:
            case = Case(**item["case"]).rounded_to(dtype)
            extra = {"integer_inputs": ("xs",)} if item["tokens"] and "integer_inputs" in model_fields else {}
            model = Model(
                name="fuzz",
                summary="fuzzed body",
                carry_names=item["carry_names"],
                default_sizes=item["sizes"],
                make_case=lambda sizes, seed, case=case: case,
                step=compile_step(item["source"]),
                loss=weighted,
                oracle_kind=OracleKind.FINITE_DIFFERENCES,
                **extra,
            )
            with np.errstate(all="raise"):
                try:
                    loss = reference_loss(model, case)
                    ill = None if np.isfinite(loss) and abs(loss) <= LOSS_LIMIT else "loss"
                except FloatingPointError:
                    ill = "fpe"
            if ill:
                row["ill_conditioned"] = ill
            else:
                body = SimpleNamespace(data_seed=item["data_seed"])
                fc = FuzzCase(body, model=model, case=case, ill_conditioned=None, oracle=oracle_grads(model, case))
                row["outcomes"] = {}
                for d in drivers:
                    try:
                        j = run_driver(fc, d, dtype, second_order=dtype == "float64")
                        row["outcomes"][d.name] = [j.status, j.hvp_status]
                    except Exception as exc:  # a crash of the judge or the driver on this body
                        row["outcomes"][d.name] = ["crash", f"{type(exc).__name__}: {exc}"[:300]]
        except Exception as exc:
            row["crash"] = f"{type(exc).__name__}: {exc}"[:300]
            row["trace"] = traceback.format_exc()[-1500:]
        f.write(json.dumps(row) + "\n")
        f.flush()
