#!/usr/bin/env bash
# compile_profile.py cold (fresh compile caches) then warm (the same caches again), each under
# /usr/bin/time -v (CPU seconds, children included) and nice -n 10, uptime before and after.
#   run_profile.sh readme|gru OUTDIR LABEL [driver,driver,...]
# The caller's environment passes through (e.g. TORCHINDUCTOR_COMPILE_THREADS for an A/B).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); py="$here/../../../.venv/bin/python"
what=$1 out=$2 label=$3; shift 3; mkdir -p "$out"
caches=$(mktemp -d)
export XDG_CACHE_HOME="$caches/xdg" TORCHINDUCTOR_CACHE_DIR="$caches/inductor" TRITON_CACHE_DIR="$caches/triton"
for pass in cold warm; do
    stem="$out/$what-$label-$pass"
    uptime > "$stem.load"
    nice -n 10 /usr/bin/time -v -o "$stem.time" "$py" "$here/compile_profile.py" "$what" "$stem.json" "$@" > "$stem.console" 2>&1
    uptime >> "$stem.load"
done
rm -rf "$caches"
