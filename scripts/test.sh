#!/usr/bin/env bash
# Sets everything up, builds every target and runs all tests (ctest). GPU
# tests skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j2 --timeout 600
