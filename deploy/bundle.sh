#!/usr/bin/env bash
# Makes a relocatable bundle of the moetune binaries for GPU hosts that have
# the CUDA driver and NCCL but no gRPC (docs/building.md): the binaries plus
# every shared library they load that such a host may lack (gRPC, abseil,
# protobuf, c-ares, re2, upb, OpenSSL, ...), all in one directory; the
# binaries find them through their rpath ($ORIGIN). Never carried: the C/C++
# runtime, the CUDA driver and runtime, cuBLAS and NCCL, which the GPU host
# has. For out-of-process backends (docs/plugins.md) it also carries
# libmoetune_model.so (where moetune-worker looks for it by default: beside
# itself), the Python plugin host and its package as plugins/, and
# plugins.json, whose commands name plugins/ relative to the bundle:
#   ./moetune-worker --plugins=plugins.json ...
#
#   deploy/bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build bundle)
#   BUNDLE_GPU_TESTS=1 deploy/bundle.sh ...     (also kernels_cuda_test)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
OUT_DIR="${2:-bundle}"
BINARIES=(moetune moetune-worker moetune-coordinator moetune-kernel-bench
  moetune-step-bench moetune-comm-bench moetune-read-bench
  moetune-golden-export)
# Libraries the GPU host provides itself.
SKIP='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libgcc_s|libstdc\+\+|libcuda\.|libcudart|libcublas|libnccl|libnvidia)'

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"
# With BUNDLE_GPU_TESTS=1 the GPU test binary travels too
# (scripts/compare_on_gpu.sh runs it).
PATHS=()
for binary in "${BINARIES[@]}"; do PATHS+=("$BUILD_DIR/bin/$binary"); done
[ "${BUNDLE_GPU_TESTS:-0}" = 1 ] && PATHS+=("$BUILD_DIR/tests/kernels_cuda_test")
# The plugins' model library loads like the binaries, from the same place.
[ -f "$BUILD_DIR/lib/libmoetune_model.so" ] &&
  PATHS+=("$BUILD_DIR/lib/libmoetune_model.so")
for path_in in "${PATHS[@]}"; do
  [ -f "$path_in" ] || continue
  binary=$(basename "$path_in")
  cp "$path_in" "$OUT_DIR/"
  # Debug info stays in the build tree; the bundle travels.
  strip --strip-unneeded "$OUT_DIR/$binary" 2>/dev/null || true
  ldd "$path_in" | awk '/=> \// {print $1, $3}' |
    while read -r name path; do
      if [[ ! "$name" =~ $SKIP ]] && [ ! -e "$OUT_DIR/$name" ]; then
        cp -L "$path" "$OUT_DIR/$name"
      fi
    done
done
cp deploy/example_sweep.json "$OUT_DIR/"
# The Python plugin host and its backends (sources only), and the plugin
# list that names them.
mkdir -p "$OUT_DIR/plugins"
tar -C worker/plugins --exclude=__pycache__ --exclude='*.pyc' -cf - . |
  tar -C "$OUT_DIR/plugins" -xf -
cp deploy/plugins.json "$OUT_DIR/"
# The dashboard page, where moetune-coordinator looks for it by default
# (web/ beside the binary).
if [ -d "$BUILD_DIR/bin/web" ]; then cp -r "$BUILD_DIR/bin/web" "$OUT_DIR/"; fi
echo "bundle: $OUT_DIR ($(du -sh "$OUT_DIR" | cut -f1), $(ls "$OUT_DIR" | wc -l) files)"
