#!/usr/bin/env bash
# What a first run ever adds: torch_loop_compiled alone on the README example with a fresh compile
# cache directory, once with inductor's precompiled headers kept (they live under the temp dir, not
# TORCHINDUCTOR_CACHE_DIR) and once with a fresh TMPDIR as well (the header is built again).
#   first_run.sh OUTDIR      -> OUTDIR/pch-kept.*, OUTDIR/pch-fresh.*
set -u
here=$(cd "$(dirname "$0")" && pwd); py="$here/../../../.venv/bin/python"
out=$1; mkdir -p "$out"
for variant in pch-kept pch-fresh; do
    d=$(mktemp -d)
    export XDG_CACHE_HOME=$d/xdg TORCHINDUCTOR_CACHE_DIR=$d/inductor
    if [ "$variant" = pch-fresh ]; then export TMPDIR=$d/tmp; mkdir -p "$TMPDIR"; fi
    uptime > "$out/$variant.load"
    nice -n 10 /usr/bin/time -v -o "$out/$variant.time" "$py" "$here/compile_profile.py" readme \
        "$out/$variant.json" torch_loop_compiled > "$out/$variant.console" 2>&1
    uptime >> "$out/$variant.load"
    unset TMPDIR
    rm -rf "$d"
done
