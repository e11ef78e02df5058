#!/usr/bin/env bash
# Usage: run.sh TREE OUT — the default run, two edge-grammar fuzz seeds and the README example, on the
# rnnbench source of the checkout TREE (its src/ first on PYTHONPATH), with the main environment's Python.
set -u
tree=$(cd "$1" && pwd); out=$2; mkdir -p "$out"; out=$(cd "$out" && pwd)
py=${PY:-$tree/.venv/bin/python}
export PYTHONPATH=$tree/src
cd "$tree"
$py -m rnnbench run --budget 0.05 --out "$out/run.jsonl" > "$out/run.txt" 2>&1; echo "run rc=$?" >> "$out/rc"
for s in 3 11; do
  $py -m rnnbench fuzz --cases 12 --seed $s --grammar edge --snap-rate 0.25 --out "$out/fuzz$s.jsonl" > "$out/fuzz$s.txt" 2>&1
  echo "fuzz$s rc=$?" >> "$out/rc"
done
$py "$(dirname "$0")/example.py" > "$out/example.txt" 2>&1; echo "example rc=$?" >> "$out/rc"
