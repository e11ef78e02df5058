#!/usr/bin/env bash
# What two processes would give: the README example's drivers split in two lists, each checked by
# compile_profile.py in its own process, both started at once (cold: fresh compile caches, shared;
# warm: the same caches again). Each under /usr/bin/time -v and nice -n 10; the pair's wall time
# (both started -> both done) and uptime before and after go to OUT/parallel-PASS.wall.
#   run_parallel.sh OUTDIR DRIVERS_A DRIVERS_B
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); py="$here/../../../.venv/bin/python"
out=$1 a=$2 b=$3; mkdir -p "$out"
caches=$(mktemp -d)
export XDG_CACHE_HOME="$caches/xdg" TORCHINDUCTOR_CACHE_DIR="$caches/inductor" TRITON_CACHE_DIR="$caches/triton"
for pass in cold warm; do
    uptime > "$out/parallel-$pass.wall"
    started=$(date +%s.%N)
    for half in a b; do
        drivers=$a; [ "$half" = b ] && drivers=$b
        nice -n 10 /usr/bin/time -v -o "$out/parallel-$pass-$half.time" "$py" "$here/compile_profile.py" readme \
            "$out/parallel-$pass-$half.json" "$drivers" > "$out/parallel-$pass-$half.console" 2>&1 &
    done
    wait
    echo "pair wall $(echo "$(date +%s.%N) - $started" | bc) s" >> "$out/parallel-$pass.wall"
    uptime >> "$out/parallel-$pass.wall"
done
rm -rf "$caches"
