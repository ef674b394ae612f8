#!/usr/bin/env bash
# CPU per search, the cluster against one process (docs/benchmarks.md, "A cluster search's
# CPU"): the local cluster of scripts/cluster.sh and one tweetsearchd process each take the
# same N synthetic tweets; then, per query mix and sort, 3 s of warm-up and DURATION s of
# `http_bench search --connections 16` against front door a0 (and against the one process).
# Every process's CPU time is read from /proc before and after, the load generator's from
# time(1); CPU per search is their sum divided by the searches answered. For the cluster it
# is also shown per role: front door a0, the four index servers together, the rest.
# Usage: bench/cluster_cpu.sh [build-dir] [tweets]   (default build/release, 1000000)
# DURATION (seconds, default 8). The cluster uses the fixed ports of scripts/cluster.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build/release}" && pwd)
TWEETS=${2:-1000000}
DURATION=${DURATION:-8}
WORK=$(mktemp -d)
export CLUSTER_DIR=$WORK/cluster TWEETSEARCH_BIN=$BUILD/tools
source bench/cluster_common.sh

scripts/cluster.sh start --sample 0 | tail -1
"$BUILD/bench/http_bench" --port 8081 --connections 4 ingest --tweets "$TWEETS" --batch 5000
start_single
"$BUILD/bench/http_bench" --port "$PORT" --connections 4 ingest --tweets "$TWEETS" --batch 5000
sleep "${SETTLE:-30}"  # let both finish their background merges

ticks() {  # "name ticks" per process; ticks are 1/100 s of user + system time
  for n in s0a s0b s1a s1b i0a i0b i1a i1b b0 b1 a0 a1 etcd; do
    echo "$n $(awk '{print $14 + $15}' "/proc/$(cat "$CLUSTER_DIR/$n.pid")/stat")"
  done
  echo "single $(awk '{print $14 + $15}' "/proc/$PID/stat")"
}

for spec in "0|1 word" "0|2-word AND" "0|mixed" "1|1 word" "1|2-word AND"; do
  sort=${spec%%|*} kind=${spec#*|}
  for target in cluster single; do
    port=8081
    [ "$target" = single ] && port=$PORT
    "$BUILD/bench/http_bench" --port "$port" --connections 16 search --duration 3 \
      --kind "$kind" --sort "$sort" > /dev/null
    ticks > "$WORK/t0"
    /usr/bin/time -f "%U %S" -o "$WORK/time" "$BUILD/bench/http_bench" --port "$port" \
      --connections 16 search --duration "$DURATION" --kind "$kind" --sort "$sort" \
      > "$WORK/out"
    ticks > "$WORK/t1"
    rate=$(grep -oE '[0-9]+ requests/s' "$WORK/out" | cut -d' ' -f1)
    join "$WORK/t0" "$WORK/t1" | awk -v target="$target" -v n="$((rate * DURATION))" \
      -v bench="$(awk '{print $1 + $2}' "$WORK/time")" -v what="$kind, sort $sort" -v rate="$rate" '
      { d = ($3 - $2) * 10000 / n  # microseconds per search
        if ($1 == "single") { if (target == "single") one += d; next }
        if (target != "cluster") next
        if ($1 == "a0") door += d; else if ($1 ~ /^i/) index_ += d; else rest += d }
      END {
        b = bench * 1e6 / n
        if (target == "single")
          printf "%-22s one process: %6d searches/s, %7.1f us CPU per search\n", what, rate, one + b
        else
          printf "%-22s cluster:     %6d searches/s, %7.1f us CPU per search (a0 %.1f, index servers %.1f, rest %.1f, load generator %.1f)\n", what, rate, door + index_ + rest + b, door, index_, rest, b
      }'
  done
done
