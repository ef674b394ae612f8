#!/usr/bin/env bash
# End-to-end benchmark of one tweetsearchd process over loopback HTTP:
#   1. bulk ingest of 1M synthetic tweets through POST /v1/tweets (durable: WAL fsynced per
#      group commit), measured by bench/http_bench;
#   2. search throughput and latency for the engine benchmark's query mixes, measured by
#      http_bench (closed loop, C++) and, for the headline 2-word query, by wrk as well.
# Usage: bench/e2e.sh [build-dir] [tweets]   (default build/release, 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
TWEETS=${2:-1000000}
DATA=$(mktemp -d)
trap 'kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT

"$BUILD/tools/tweetsearchd" --data-dir "$DATA/data" --http-port 0 --grpc-port -1 --sample 0 \
  --demo-key-scopes search,ingest \
  --port-file "$DATA/ports" --log-level warn &
PID=$!
for _ in $(seq 1 600); do [ -s "$DATA/ports" ] && break; sleep 0.1; done
PORT=$(sed -E 's/.*"http_port": ([0-9]+).*/\1/' "$DATA/ports")
echo "tweetsearchd on port $PORT, data in $DATA"

"$BUILD/bench/http_bench" --port "$PORT" --connections 4 ingest --tweets "$TWEETS" --batch 5000

for kind in "2-word AND" "1 word" "3-word AND" "2-word OR" "mixed"; do
  for sort in 0 1 2; do
    "$BUILD/bench/http_bench" --port "$PORT" --connections 16 search --duration 5 \
      --kind "$kind" --sort "$sort"
  done
done
if command -v wrk >/dev/null; then
  "$BUILD/bench/http_bench" search --kind "2-word AND" --dump-targets "$DATA/targets"
  for c in 16 32; do
    echo "wrk, 2-word AND, newest, top 20, $c connections:"
    WRK_TARGETS="$DATA/targets" WRK_KEY=demo-key-0123456789 \
      wrk -t1 -c"$c" -d10s --latency -s bench/wrk_search.lua "http://127.0.0.1:$PORT" |
      grep -E "50%|99%|Requests/sec|Non-2xx"
  done
fi
