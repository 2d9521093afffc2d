#!/usr/bin/env bash
# Builds the CUPTI injection library that records a CUDA process's kernel
# timeline (kernels/profiling/cupti_injection.cc) on a GPU machine: CMake
# leaves it out, since CI and dev machines have no CUPTI.
#   scripts/build_cupti_injection.sh [OUT_DIR]   (default build/cupti)
# then
#   CUDA_INJECTION64_PATH=OUT_DIR/libmoetune_cupti_injection.so \
#   MOETUNE_KERNEL_TIMELINE=timeline.csv moetune-step-bench ...
# Finds CUPTI's headers and libcupti under $CUDA_HOME (default
# /usr/local/cuda: extras/CUPTI, include + lib64/lib) or in Python's
# site-packages (the nvidia-cuda-cupti wheel: nvidia/cu13, or
# nvidia/cuda_cupti before CUDA 13); CUPTI_INCLUDE and CUPTI_LIB_DIR, when
# set, are tried first. Needs only g++ and CUPTI: no abseil, no CMake.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT_DIR="${1:-$REPO/build/cupti}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
CXX="${CXX:-g++}"
say() { echo "build_cupti_injection: $*" >&2; }

# "include_dir|lib_dir" pairs to try, in order.
CANDIDATES=()
[ -n "${CUPTI_INCLUDE:-}" ] && CANDIDATES+=("$CUPTI_INCLUDE|${CUPTI_LIB_DIR:-}")
CANDIDATES+=("$CUDA_HOME/extras/CUPTI/include|$CUDA_HOME/extras/CUPTI/lib64"
  "$CUDA_HOME/include|$CUDA_HOME/lib64" "$CUDA_HOME/include|$CUDA_HOME/lib")
if command -v python3 >/dev/null 2>&1; then
  SITE_DIRS=$(python3 -c 'import site
print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' \
    2>/dev/null || true)
  while IFS= read -r dir; do
    [ -n "$dir" ] || continue
    for pkg in nvidia/cu13 nvidia/cuda_cupti; do
      CANDIDATES+=("$dir/$pkg/include|$dir/$pkg/lib")
    done
  done <<< "$SITE_DIRS"
else
  say "no python3: Python's site-packages not searched"
fi

# The newest libcupti in $1: libcupti.so, else the highest libcupti.so.N.
find_libcupti() {
  [ -d "$1" ] || return 1
  if [ -e "$1/libcupti.so" ]; then echo "$1/libcupti.so"; return 0; fi
  local newest
  newest=$(ls -v "$1"/libcupti.so.* 2>/dev/null | tail -n 1 || true)
  [ -n "$newest" ] && echo "$newest"
}

CUPTI_INC="" LIBCUPTI=""
for pair in "${CANDIDATES[@]}"; do
  inc="${pair%%|*}" libdir="${pair#*|}"
  [ -f "$inc/cupti_activity.h" ] || continue
  if lib=$(find_libcupti "$libdir"); then
    CUPTI_INC="$inc" LIBCUPTI="$lib"
    break
  fi
  say "headers in $inc but no libcupti.so* in $libdir"
done
if [ -z "$CUPTI_INC" ]; then
  say "no CUPTI found; looked for cupti_activity.h and libcupti.so* in:"
  printf '  %s\n' "${CANDIDATES[@]/|/  }" >&2
  say "set CUPTI_INCLUDE and CUPTI_LIB_DIR, or install nvidia-cuda-cupti"
  exit 1
fi
say "CUPTI headers: $CUPTI_INC"
say "libcupti: $LIBCUPTI"

# cuda.h, which cupti.h includes: beside CUPTI's headers (the wheels share
# one include dir) or in the toolkit.
CUDA_INC=""
for dir in "$CUPTI_INC" "$CUDA_HOME/include" /usr/local/cuda/include; do
  if [ -f "$dir/cuda.h" ]; then CUDA_INC="$dir"; break; fi
done
[ -n "$CUDA_INC" ] || { say "no cuda.h beside CUPTI's headers or in $CUDA_HOME/include"; exit 1; }
say "cuda.h: $CUDA_INC"

# The kernel record struct is versioned (CUpti_ActivityKernel4 .. 10 so
# far); the newest declared is the one this CUPTI writes. graphId, which
# the timeline needs, came with version 5.
RECORD=$({ grep -ho 'CUpti_ActivityKernel[0-9]\+;' "$CUPTI_INC"/cupti_activity*.h ||
  true; } | tr -d ';' | sort -V | tail -n 1)
VERSION="${RECORD#CUpti_ActivityKernel}"
if [ -z "$RECORD" ] || [ "$VERSION" -lt 5 ]; then
  say "no CUpti_ActivityKernelN with N >= 5 in $CUPTI_INC/cupti_activity*.h (found '${RECORD:-none}')"
  exit 1
fi
say "kernel record: $RECORD"

mkdir -p "$OUT_DIR"
OUT_LIB="$OUT_DIR/libmoetune_cupti_injection.so"
# -fvisibility=hidden: only InitializeInjection is exported, so the
# timeline's functions cannot clash with the traced program's symbols.
# -z defs: an unresolved symbol fails here, not when the driver loads it.
"$CXX" -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -Wall -Wextra \
  -I"$REPO" -I"$CUPTI_INC" -I"$CUDA_INC" \
  -DMOETUNE_CUPTI_KERNEL_RECORD="$RECORD" \
  "$REPO/kernels/profiling/cupti_injection.cc" \
  "$REPO/kernels/profiling/kernel_timeline.cc" \
  "$LIBCUPTI" -Wl,-rpath,"$(dirname "$LIBCUPTI")" -Wl,-z,defs \
  -o "$OUT_LIB"
say "built $OUT_LIB"
echo "$OUT_LIB"
