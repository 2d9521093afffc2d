#!/usr/bin/env bash
# Makes a relocatable bundle of the moetune binaries for GPU hosts that have
# the CUDA driver and NCCL but no gRPC (docs/design.md §8): the binaries plus every
# shared library they load that such a host may lack (gRPC, abseil, protobuf,
# c-ares, re2, upb, OpenSSL, ...), all in one directory; the binaries find them
# through their rpath ($ORIGIN). Never carried: the C/C++ runtime, the CUDA
# driver and runtime, cuBLAS and NCCL, which the GPU host has.
#
#   deploy/bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build bundle)
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
for binary in "${BINARIES[@]}"; do
  [ -x "$BUILD_DIR/bin/$binary" ] || continue
  cp "$BUILD_DIR/bin/$binary" "$OUT_DIR/"
  # Debug info stays in the build tree; the bundle travels.
  strip --strip-unneeded "$OUT_DIR/$binary" 2>/dev/null || true
  ldd "$BUILD_DIR/bin/$binary" | awk '/=> \// {print $1, $3}' |
    while read -r name path; do
      if [[ ! "$name" =~ $SKIP ]] && [ ! -e "$OUT_DIR/$name" ]; then
        cp -L "$path" "$OUT_DIR/$name"
      fi
    done
done
cp deploy/example_sweep.json "$OUT_DIR/"
# The dashboard page, where moetune-coordinator looks for it by default
# (web/ beside the binary).
if [ -d "$BUILD_DIR/bin/web" ]; then cp -r "$BUILD_DIR/bin/web" "$OUT_DIR/"; fi
echo "bundle: $OUT_DIR ($(du -sh "$OUT_DIR" | cut -f1), $(ls "$OUT_DIR" | wc -l) files)"
