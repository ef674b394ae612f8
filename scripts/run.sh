#!/usr/bin/env bash
# Installs what is missing, builds, and starts tweetsearchd (every role in one process) on
# build/run/data. On the first start it loads 300,000 generated tweets and prints the URL and
# the demo key to search them with. Extra arguments go to tweetsearchd (e.g. --http-port 8081,
# --sample 500000, --no-quotas); Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build/run -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
  -DBUILD_BENCHMARKS=OFF > /dev/null
cmake --build build/run -j "$(nproc)" --target tweetsearchd tweetctl tweetgen tweetquery
# Quotas are on, with the shipped example rules (the demo key's tier allows 50 searches a
# second), unless the arguments name other rules (--limits FILE) or say --no-quotas.
limits=(--limits data/limits.example.yaml)
args=()
for arg in "$@"; do
  case "$arg" in
    --no-quotas) limits=() ;;
    --limits | --limits=*) limits=(); args+=("$arg") ;;
    *) args+=("$arg") ;;
  esac
done
exec build/run/tools/tweetsearchd --data-dir build/run/data --http-port 8080 --grpc-port 9090 \
  "${limits[@]}" "${args[@]}"
