#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test twice: an optimized build, then a build
# under AddressSanitizer + UndefinedBehaviorSanitizer. Last, the concurrency test runs under
# ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
# playwright-core for the browser tests (the browser itself is Debian's Chromium).
npm ci --prefix web --no-audit --no-fund

JOBS="${JOBS:-$(nproc)}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"

echo "== release build and tests"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON \
  -DBUILD_BENCHMARKS=ON
cmake --build build/release -j "$JOBS"
ctest --test-dir build/release --output-on-failure -j "$JOBS"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON -DBUILD_BENCHMARKS=OFF \
  -DTWEETSEARCH_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS="-O1"
cmake --build build/asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$JOBS"

echo "== ThreadSanitizer: the one-writer/many-readers test"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON -DBUILD_BENCHMARKS=OFF \
  -DTWEETSEARCH_SANITIZE=thread
cmake --build build/tsan -j "$JOBS" --target concurrency_test
TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan --output-on-failure -R '^ConcurrencyTest\.'

