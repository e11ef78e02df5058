#!/bin/bash
# the measurements of docs/results/2026-11-25-ray-executor.md
set -u
cd "$(dirname "$0")/../../.."
RB=.venv/bin/rnnbench; RAY=.venv/bin/ray
RUN="run --models decay,rnn,lstm --drivers torch_loop,torch_scan,torch_loop_setitem --environments main --no-time --threads 1"
FUZZ="fuzz --cases 12 --drivers torch_loop,torch_scan --no-second-order --losses weighted"
t() { local name=$1; shift; rm -f out.jsonl; local s=$(date +%s.%N); "$@" > /dev/null 2> err.txt; local rc=$?; local e=$(date +%s.%N); echo "$name rc=$rc wall=$(echo "$e - $s" | bc) load=\"$(uptime | sed 's/.*load average: //')\""; }
cluster() { # $1 cpus: a cluster of its own on a free port, stopped by its process group
  port=$(.venv/bin/python -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
  tmp=$(mktemp -d -t rb-ray-XXXX)
  setsid $RAY start --head --block --port $port --num-cpus $1 --temp-dir $tmp --include-dashboard false --disable-usage-stats > cluster.log 2>&1 &
  CPID=$!; until grep -q "Ray runtime started" cluster.log; do sleep 0.5; done; ADDR=127.0.0.1:$port
}
stop() { kill -TERM $CPID; wait $CPID; sleep 1; pkill -KILL -s $CPID 2>/dev/null; rm -rf $tmp; }
date -u; uptime
t run-local $RB $RUN --out out.jsonl
t run-ray-own-instance $RB $RUN --out out.jsonl --executor ray
t fuzz-local $RB $FUZZ --out out.jsonl
t fuzz-ray-own-instance $RB $FUZZ --out out.jsonl --executor ray
for n in 1 2; do
  cluster $n
  t run-ray-address-cpus$n $RB $RUN --out out.jsonl --executor ray --address $ADDR
  t fuzz-ray-address-cpus$n $RB $FUZZ --out out.jsonl --executor ray --address $ADDR
  stop
done
uptime
