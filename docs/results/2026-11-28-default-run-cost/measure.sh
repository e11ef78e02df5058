#!/usr/bin/env bash
cd "$(git rev-parse --show-toplevel)"
out=${1:?OUTDIR}
git rev-parse --short HEAD > $out/commit
docs/results/2026-11-28-suite-cost/run.sh readme $out/readme
caches=$(mktemp -d)
export XDG_CACHE_HOME="$caches/xdg" TORCHINDUCTOR_CACHE_DIR="$caches/inductor" TRITON_CACHE_DIR="$caches/triton"
for pass in cold warm; do
  uptime > $out/bench-$pass.load
  /usr/bin/time -v make bench > $out/bench-$pass.console 2>&1
  uptime >> $out/bench-$pass.load
done
echo done > $out/finished
