"""The default run's rows before and after: the same rows, each one's status, H v status and oracle kind."""

import json
import sys


def rows(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if "model" in r and "driver" in r:
            out[(r["model"], r["driver"], r.get("dtype"), r.get("loss_form"), r.get("environment_name"))] = (
                r["status"],
                r.get("hvp_status"),
                r.get("oracle_kind"),
            )
    return out


old, new = rows(sys.argv[1]), rows(sys.argv[2])
same = sum(old[k] == new.get(k) for k in old)
print(f"rows before {len(old)}, after {len(new)}; the same status, H v status and oracle kind: {same}")
for k in sorted(set(old) | set(new)):
    if old.get(k) != new.get(k):
        print("differs:", k, old.get(k), "->", new.get(k))
