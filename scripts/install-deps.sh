#!/usr/bin/env bash
# Installs the Debian 12 packages that tweetsearch needs to build, test and run.
# Idempotent: packages already present are left alone, and apt is only asked when something
# is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libabsl-dev libicu-dev libstemmer-dev libxxhash-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  librocksdb-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libboost-dev libssl-dev libyaml-cpp-dev libspdlog-dev libhiredis-dev redis-server etcd-server etcd-client curl
  haproxy
  clang libclang-rt-14-dev clang-format-14 util-linux iproute2
  wrk
  chromium chromium-driver
)
# Node.js and npm run the browser tests (web/tests); a machine that has them from elsewhere
# keeps its own, else Debian's are installed.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
