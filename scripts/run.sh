#!/usr/bin/env bash
# Installs what is missing, builds, and starts tweetsearch on a generated sample corpus.
# Until the HTTP front door lands, "the service" is the engine's query shell: type queries,
# get results. Extra arguments go to tweetquery (e.g. --sort 1, --sample 500000).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build/run -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
  -DBUILD_BENCHMARKS=OFF > /dev/null
cmake --build build/run -j "$(nproc)" --target tweetquery tweetgen
exec build/run/tools/tweetquery "$@"
