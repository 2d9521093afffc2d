#!/usr/bin/env bash
# Installs the build dependencies (Debian 12 packages) and builds moetune
# into build/ with Ninja and ccache. CUDA is used when /usr/local/cuda/bin/nvcc
# exists (set MOETUNE_CUDA=OFF to skip it). Idempotent: re-running only
# rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build ccache g++ pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libsqlite3-dev sqlite3 libgtest-dev libgmock-dev
  libbenchmark-dev grpc-proto libssl-dev openssl)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD_DIR="${BUILD_DIR:-build}"
CUDA_FLAG=()
[ -n "${MOETUNE_CUDA:-}" ] && CUDA_FLAG=(-DMOETUNE_CUDA="$MOETUNE_CUDA")
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${CUDA_FLAG[@]}" >/dev/null
ninja -C "$BUILD_DIR" "$@"
