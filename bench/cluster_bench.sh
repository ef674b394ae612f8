#!/usr/bin/env bash
# The cost of distribution, on one machine (docs/benchmarks.md, "Cluster"):
#   1. ingest of N synthetic tweets through a front door of the local cluster (2 storage
#      partitions x 2 replicas, durable on both replicas before the answer), and the same N
#      into one tweetsearchd process;
#   2. search throughput and latency for the same queries against both;
#   3. rebuild of index replica i0a (about N/2 tweets) from the builder and storage, with
#      tweetctl rebuild, after its data directory is deleted;
#   4. the secondary storage replica of partition 0 and builder b1 lose their data and restart
#      empty: the time until the replica is in sync again (a full copy of partition 0, since
#      the logs keep only 100,000 changes here) and until b1 serves again (a resync from
#      storage snapshots).
# Usage: bench/cluster_bench.sh [build-dir] [tweets]   (default build/release, 2000000)
# The cluster uses the fixed ports of scripts/cluster.sh (8081, 7100-7301, 2479, 6479).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build/release}" && pwd)
TWEETS=${2:-2000000}
WORK=$(mktemp -d)
export CLUSTER_DIR=$WORK/cluster TWEETSEARCH_BIN=$BUILD/tools CLUSTER_MAX_LOG_CHANGES=100000
source bench/cluster_common.sh

echo "== cluster: ingest $TWEETS tweets through one front door"
scripts/cluster.sh start --sample 0 | tail -1
"$BUILD/bench/http_bench" --port 8081 --connections 4 ingest --tweets "$TWEETS" --batch 5000

echo "== one process: ingest the same $TWEETS tweets"
start_single
"$BUILD/bench/http_bench" --port "$PORT" --connections 4 ingest --tweets "$TWEETS" --batch 5000

for kind in "2-word AND" "1 word" "mixed"; do
  for sort in 0 1; do
    for target in "cluster 8081" "one-process $PORT"; do
      set -- $target
      echo "== search on $1: $kind, sort $sort"
      "$BUILD/bench/http_bench" --port "$2" --connections 16 search --duration 8 \
        --kind "$kind" --sort "$sort"
    done
  done
done

# tweetctl status exits 1 while anything is unhealthy; here it is only shown.
status() { "$BUILD/tools/tweetctl" status --topology "$CLUSTER_DIR/topology.yaml" "$@" || true; }

echo "== rebuild of i0a after losing its data"
status | grep -E "^index|^builder"
scripts/cluster.sh wipe i0a
scripts/cluster.sh restart i0a
sleep 2
/usr/bin/time -f "tweetctl: %e s wall, %M KiB max RSS" "$BUILD/tools/tweetctl" rebuild \
  --topology "$CLUSTER_DIR/topology.yaml" --index-partition 0 --replica a --force
status | grep -E "^index"

# Which of s0a and s0b is the secondary (the first to start wins the election).
lost=$(status | awk '$1 == "storage" && $3 == "0" && $6 == "secondary" { print $2 }')
[ -n "$lost" ] || { echo "partition 0 has no secondary storage replica" >&2; exit 1; }
echo "== storage replica $lost (secondary of partition 0) and builder b1 lose their data"
scripts/cluster.sh wipe "$lost"
scripts/cluster.sh wipe b1
sleep 6  # past the lease and the live-reader window of the lost processes' positions
start=$(date +%s.%N)
scripts/cluster.sh restart "$lost"
scripts/cluster.sh restart b1
copied="" resynced=""
for _ in $(seq 1 3000); do
  now=$(date +%s.%N)
  if [ -z "$copied" ] && curl -s localhost:8081/metrics |
      grep -q '^tweetsearch_storage_secondary_in_sync{partition="0"} 1$'; then
    copied=$(echo "$now - $start" | bc)
  fi
  if [ -z "$resynced" ] && status | grep -qE '^builder +b1 .* serving'; then
    resynced=$(echo "$now - $start" | bc)
  fi
  [ -n "$copied" ] && [ -n "$resynced" ] && break
  sleep 0.2
done
echo "$lost in sync after ${copied:-?} s; b1 serving after ${resynced:-?} s (from the restarts)"
status | grep -E "^storage +s0|^builder"
