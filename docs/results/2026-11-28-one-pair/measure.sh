#!/usr/bin/env bash
# The same three checks on two commits of this repository, each from a worktree of its own, run by
# the main environment's interpreter: the README's check_recurrence example, the default run
# (`rnnbench run`, --suite quick) and two fuzz seeds at float64 (with H v) and float32.
#   docs/results/2026-11-28-one-pair/measure.sh BEFORE AFTER OUT
# then: python docs/results/2026-11-28-one-pair/diff_verdicts.py OUT/before OUT/after
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); checkout=$(cd "$here/../../.." && pwd)
before=$1 after=$2 out=$3
py="$checkout/.venv/bin/python"
for side in before after; do
    rev=${!side}; tree=$(mktemp -d); shim=$(mktemp -d)
    git -C "$checkout" worktree add -q --detach "$tree" "$rev"
    # the commit's package on the path ahead of the editable install
    ln -s "$tree/src/rnnbench" "$shim/rnnbench"; ln -s "$tree/models" "$shim/rnnbench_models"
    mkdir -p "$out/$side"; uptime > "$out/$side/load-start.txt"
    (cd "$(mktemp -d)" && export PYTHONPATH="$shim" &&
        "$py" "$here/readme_example.py" "$out/$side/readme.json" > "$out/$side/readme.console" 2>&1 &&
        "$py" -m rnnbench.cli run --out "$out/$side/default.jsonl" > "$out/$side/default.console" 2>&1 &&
        for seed in 0 2027; do
            "$py" -m rnnbench.cli fuzz --cases 6 --seed $seed --dtypes float64,float32 \
                --out "$out/$side/fuzz-$seed.jsonl" > "$out/$side/fuzz-$seed.console" 2>&1
        done)
    uptime > "$out/$side/load-end.txt"
    git -C "$checkout" worktree remove --force "$tree"
done
