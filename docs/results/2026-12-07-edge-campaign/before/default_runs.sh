#!/bin/sh
# The default run (`rnnbench run`, the quick suite), checked without timing, on the judge before issue 49
# (591eaae) and on today's: the same rows, their statuses compared by compare_default.py.
set -u
here=$(cd "$(dirname "$0")" && pwd)
for side in old new; do
    src=$([ "$side" = old ] && echo "$here/old-src" || echo "${NEW_SRC:?}")
    env PYTHONPATH="$src" nice -n 5 "${PYTHON:?}" -m rnnbench run --no-time --out "$here/default-$side.jsonl" \
        > "$here/default-$side.log" 2>&1
done
