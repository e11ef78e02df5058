"""Every row's (driver, loss) -> (status, max rel err, H v status) of two check_seconds.py outputs, the differences
printed; exit 1 if a status differs.

    python same_statuses.py BEFORE.json AFTER.json"""

import json
import sys

before, after = ({(r[0], r[1]): r[2:] for r in json.load(open(p))["rows"]} for p in sys.argv[1:3])
status_changed = 0
for key in sorted(before.keys() | after.keys()):
    b, a = before.get(key), after.get(key)
    if b != a:
        changed = b is None or a is None or b[0] != a[0] or b[2] != a[2]
        status_changed += changed
        print(("STATUS " if changed else "error  ") + f"{key}: {b} -> {a}")
print(f"{len(after)} rows, {status_changed} status changes")
sys.exit(1 if status_changed else 0)
