"""Export the edge2 campaign's bodies (seed 1128, snap rate 0.25, weighted loss) as plain data: the
step's source and the case's arrays, so a judge from any commit can replay the same bodies.
Usage: PYTHONPATH=<new src> python export_bodies.py N OUT.pkl"""

import dataclasses
import pickle
import sys

from rnnbench.fuzz import linear
from rnnbench.fuzz.cases import body_case
from rnnbench.fuzz.grammar import Grammar

n, out = int(sys.argv[1]), sys.argv[2]
grammar = Grammar(name="edge2", snap_rate=0.25)
items = []
for index in range(n):
    body = linear.body_for(1128, index, ("weighted",), grammar)
    case = body_case(body, "fuzz")
    items.append(
        {
            "index": index,
            "source": body.source(),
            "carry_names": tuple(body.carry_names),
            "sizes": {"T": body.length, "n": body.n},
            "data_seed": body.data_seed,
            "tokens": bool(body.tokens and body.has_xs),
            "linear": bool(body.linear),
            "loss": body.loss,
            "case": {f.name: getattr(case, f.name) for f in dataclasses.fields(case)},
        }
    )
pickle.dump(items, open(out, "wb"))
print(
    len(items),
    "bodies;",
    sum(i["tokens"] for i in items),
    "with integer tokens;",
    sum(i["linear"] for i in items),
    "linear",
)
