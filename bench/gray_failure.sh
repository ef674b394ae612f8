#!/usr/bin/env bash
# A frozen index replica under search load (docs/benchmarks.md, "A frozen index replica"):
# the local cluster (scripts/cluster.sh) with N generated tweets; http_bench searches front door
# a0 for 40 s; after 10 s index replica i0a is frozen (SIGSTOP) for 15 s, then woken (SIGCONT).
# Prints http_bench's timeline (answers/s, p50, p99, max and errors per half second) and a
# summary: the p99 before the freeze, and how long the p99 stayed above twice that.
# Usage: bench/gray_failure.sh [build-dir] [tweets] [kind] [sort]
#   (default build/release, 200000, "1 word", 0 = newest first)
# The cluster uses the fixed ports of scripts/cluster.sh (8081, 7100-7301, 2479, 6479).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build/release}" && pwd)
TWEETS=${2:-200000}
KIND=${3:-1 word}
SORT=${4:-0}
WORK=$(mktemp -d)
export CLUSTER_DIR=$WORK/cluster TWEETSEARCH_BIN=$BUILD/tools
cleanup() {
  [ -f "$CLUSTER_DIR/i0a.pid" ] && kill -CONT "$(cat "$CLUSTER_DIR/i0a.pid")" 2> /dev/null || true
  scripts/cluster.sh stop > /dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

scripts/cluster.sh start --sample "$TWEETS" | tail -1
# Warm up: caches, and the front door's record of each partition's latencies.
"$BUILD/bench/http_bench" --port 8081 --connections 8 search --duration 3 --kind "$KIND" \
  --sort "$SORT" > /dev/null
"$BUILD/bench/http_bench" --port 8081 --connections 8 search --duration 40 --kind "$KIND" \
  --sort "$SORT" --timeline 0.5 > "$WORK/timeline" || true &
LOAD=$!
PID=$(cat "$CLUSTER_DIR/i0a.pid")
sleep 10
kill -STOP "$PID"
sleep 15
kill -CONT "$PID"
wait "$LOAD" || true
cat "$WORK/timeline"
# Rows are "from_s requests_per_s p50_ms p99_ms max_ms errors"; the freeze spans [10, 25).
awk '$1 ~ /^[0-9.]+$/ && NF == 6 {
       if ($1 >= 2 && $1 < 10) { before += $4; n++ }
       rows[$1] = $4; errors += $6
     }
     END {
       base = before / n
       for (t in rows) if (t >= 10 && t < 30 && rows[t] > 2 * base) slow += 0.5
       printf "p99 before the freeze (mean of half-second p99s, 2-10 s): %.2f ms\n", base
       printf "time with p99 above twice that, from the freeze to 5 s after it: %.1f s\n", slow
       printf "errors: %d\n", errors
     }' "$WORK/timeline"
