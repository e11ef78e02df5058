#!/usr/bin/env bash
# Cold (fresh compile caches, fresh cache dir) then warm (the same caches again) for one check of phases.py.
#   run.sh readme|gru OUTDIR [--profile]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); py="$here/../../../.venv/bin/python"
what=$1 out=$2; shift 2; mkdir -p "$out"
caches=$(mktemp -d)
export XDG_CACHE_HOME="$caches/xdg" TORCHINDUCTOR_CACHE_DIR="$caches/inductor" TRITON_CACHE_DIR="$caches/triton"
for pass in cold warm; do
    uptime > "$out/$what-$pass.load"
    nice -n 10 "$py" "$here/phases.py" "$what" "$out/$what-$pass.json" "$@" > "$out/$what-$pass.console" 2>&1
    uptime >> "$out/$what-$pass.load"
done
rm -rf "$caches"
