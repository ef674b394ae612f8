#!/usr/bin/env bash
# What counting every call in the usage series costs a search: the same daemon and data, with
# usage analytics on (--usage-flush-ms 5000) and off (0), alternately, wrk at 16 connections on
# the 2-word AND newest-first query.
#
#   bench/usage_overhead.sh [build dir, default build/release] [rounds, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build/release}"
ROUNDS="${2:-3}"
DATA="$(mktemp -d)"
trap 'kill "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DATA"' EXIT

start() {
  rm -f "$DATA/ports"
  "$BUILD/tools/tweetsearchd" --data-dir "$DATA/d" --http-port 0 --grpc-port -1 \
    --port-file "$DATA/ports" --usage-flush-ms "$1" --log-level warn &
  PID=$!
  while [ ! -s "$DATA/ports" ]; do sleep 0.2; done
  PORT=$(sed -E 's/.*"http_port": ([0-9]+).*/\1/' "$DATA/ports")
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }

start 0  # the first start loads the 300,000 sample tweets
"$BUILD/bench/http_bench" search --kind "2-word AND" --dump-targets "$DATA/targets"
stop
for round in $(seq "$ROUNDS"); do
  for flush in 5000 0; do
    start "$flush"
    rps=$(WRK_TARGETS="$DATA/targets" WRK_KEY=demo-key-0123456789 \
      wrk -t1 -c16 -d10s --latency -s bench/wrk_search.lua "http://127.0.0.1:$PORT" |
      awk '/Requests\/sec/ {print $2}')
    echo "round $round usage $([ "$flush" = 0 ] && echo off || echo on): $rps req/s"
    stop
  done
done
