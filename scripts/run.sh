#!/usr/bin/env bash
# Installs what is missing, builds, and starts tweetsearchd (every role in one process) on
# build/run/data. On the first start it loads 300,000 generated tweets and prints the URL and
# the demo key to search them with. Extra arguments go to tweetsearchd (e.g. --http-port 8081,
# --sample 500000); Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build/run -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
  -DBUILD_BENCHMARKS=OFF > /dev/null
cmake --build build/run -j "$(nproc)" --target tweetsearchd tweetctl tweetgen tweetquery
exec build/run/tools/tweetsearchd --data-dir build/run/data --http-port 8080 --grpc-port 9090 "$@"
