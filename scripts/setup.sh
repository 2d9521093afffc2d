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
  libbenchmark-dev grpc-proto libssl-dev openssl
  libcpp-httplib-dev prometheus-cpp-dev
  chromium fonts-dejavu-core python3 python3-numpy python3-yaml prometheus)
# The HTTP side: cpp-httplib and prometheus-cpp build into the coordinator;
# chromium (headless) lets ctest load the dashboard page and screenshot it;
# python3-numpy runs the Python plugin host's numpy backend (docs/plugins.md);
# python3-yaml and prometheus (its promtool) check deploy/ (tests/deploy).
# npm fetches the page's charting library (coordinator/web/package.json);
# where no npm is installed yet, Debian's is.
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

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

# The page's charting library, at the version package-lock.json pins, into
# the git-ignored coordinator/web/node_modules. Served as it is: no build.
WEB=coordinator/web
CHART_JS=$(sed -n 's/.*"chart.js": "\([^"]*\)".*/\1/p' "$WEB/package.json")
if ! grep -qs "\"version\": \"$CHART_JS\"" "$WEB/node_modules/chart.js/package.json"; then
  echo "setup: installing the dashboard's npm packages into $WEB/node_modules" >&2
  npm ci --prefix "$WEB" --no-audit --no-fund --loglevel=error >/dev/null
fi

BUILD_DIR="${BUILD_DIR:-build}"
CUDA_FLAG=()
[ -n "${MOETUNE_CUDA:-}" ] && CUDA_FLAG=(-DMOETUNE_CUDA="$MOETUNE_CUDA")
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${CUDA_FLAG[@]}" >/dev/null
ninja -C "$BUILD_DIR" "$@"
