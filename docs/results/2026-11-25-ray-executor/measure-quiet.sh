#!/bin/bash
# The quiet rerun of docs/results/2026-11-25-ray-executor.md: nothing else running. A fuzz campaign
# and a run, each on the local pool and on a Ray cluster of 1 and of 2 CPUs (the cluster started
# before the timed command, so the numbers exclude Ray's start), interleaved, twice. CASES=300 ROUNDS=1: the
# larger campaign.
set -u
cd "$(dirname "$0")/../../.."
RB=.venv/bin/rnnbench; RAY=.venv/bin/ray
RUN="run --models decay,rnn,lstm,loop_mul --drivers torch_loop,torch_scan,jax_lax_scan,jax_loop --environments main --no-time --threads 1"
FUZZ="fuzz --cases ${CASES:-48} --drivers torch_loop,jax_lax_scan --no-second-order --losses weighted"
W=$(mktemp -d -t rb-quiet-XXXX)
t() { local name=$1; shift; rm -f $W/out.jsonl; local s=$(date +%s.%N); "$@" --out $W/out.jsonl > $W/$name.out 2>&1; local rc=$?; local e=$(date +%s.%N)
      echo "$name rc=$rc wall=$(echo "$e - $s" | bc) outcomes=$(wc -l < $W/out.jsonl) load=\"$(uptime | sed 's/.*load average: //')\""; }
cluster() { # $1 cpus: a cluster of its own on a free port, stopped by its process group
  port=$(.venv/bin/python -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
  tmp=$(mktemp -d -t rb-ray-XXXX)
  setsid $RAY start --head --block --port $port --num-cpus $1 --temp-dir $tmp --include-dashboard false --disable-usage-stats > $W/cluster.log 2>&1 &
  CPID=$!; until grep -q "Ray runtime started" $W/cluster.log; do sleep 0.5; done; ADDR=127.0.0.1:$port
}
stop() { kill -TERM $CPID; wait $CPID; sleep 1; pkill -KILL -s $CPID 2>/dev/null; rm -rf $tmp; }
date -u; uptime; git rev-parse --short HEAD
for round in $(seq ${ROUNDS:-2}); do
  t fuzz-local $RB $FUZZ
  t run-local $RB $RUN
  for n in 1 2; do
    cluster $n
    t fuzz-ray-cpus$n $RB $FUZZ --executor ray --address $ADDR
    t run-ray-cpus$n $RB $RUN --executor ray --address $ADDR
    stop
  done
done
uptime; rm -rf $W
