#!/usr/bin/env bash
# Installs what is missing, checks the style (formatting, function length), builds, and runs
# every test twice: an optimized build (g++), then a build under AddressSanitizer +
# UndefinedBehaviorSanitizer (clang, every library also instrumented for libFuzzer, so that
# the same build runs each libFuzzer target for 30 s after the tests). Then the concurrency
# tests (index, limiter) run under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
# playwright-core for the browser tests (the browser itself is Debian's Chromium).
npm ci --prefix web --no-audit --no-fund

echo "== style: clang-format, and no function over 150 lines"
scripts/check-style.sh

JOBS="${JOBS:-$(nproc)}"
# Line tables only (-g1): sanitizer reports and backtraces keep files and lines, and a build
# from a cold compiler cache takes a quarter to a third less time (docs/architecture.md).
DEBUG_INFO=-DTWEETSEARCH_DEBUG_INFO=lines
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"

echo "== release build and tests"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON \
  -DBUILD_BENCHMARKS=ON "$DEBUG_INFO"
cmake --build build/release -j "$JOBS"
ctest --test-dir build/release --output-on-failure -j "$JOBS"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests (clang; the fuzz targets too)"
# One build serves the tests and the fuzz targets: from a cold compiler cache about 12 minutes
# less than a g++ build for the tests and a clang build for the fuzzers (docs/architecture.md).
CC=clang CXX=clang++ cmake -S . -B build/asan-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON \
  -DBUILD_BENCHMARKS=OFF -DTWEETSEARCH_FUZZ=ON -DTWEETSEARCH_SANITIZE=address,undefined \
  -DCMAKE_CXX_FLAGS="-O1" "$DEBUG_INFO" -DTWEETSEARCH_FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
cmake --build build/asan-fuzz -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan-fuzz --output-on-failure -j "$JOBS" -E '^Fuzz\.'

echo "== ThreadSanitizer: the concurrency tests (the index's writer, readers, seal and merge threads;"
echo "   the quota limiter's shards and Redis lanes; the streams' matcher, writers and readers;"
echo "   the front door's record of replicas)"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON -DBUILD_BENCHMARKS=OFF \
  -DTWEETSEARCH_SANITIZE=thread "$DEBUG_INFO"
cmake --build build/tsan -j "$JOBS" --target concurrency_test limiter_test redis_limiter_test \
  stream_hub_test replica_health_test timer_thread_test
TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan --output-on-failure --no-tests=error -R 'ConcurrencyTest\.|LimiterTest\.|StreamSlotsTest\.|StreamHubTest\.|StreamFeedTest\.|StreamEventIdTest\.|ReplicaHealthTest\.|TimerThreadTest\.'

echo "== coverage-guided fuzzing: each libFuzzer target for ${FUZZ_SECONDS:-30} s (ASan + UBSan)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan-fuzz --output-on-failure -j "$JOBS" -R '^Fuzz\.'
