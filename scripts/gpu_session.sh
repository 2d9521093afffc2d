#!/usr/bin/env bash
# One batched session on a GPU host (the H200 of the device tool), run from a
# bundle made by deploy/bundle.sh: probe, a sweep of the GPU backends through
# an embedded coordinator and one worker per GPU, the winner, and the kernel
# benchmark. Everything lands in $OUT (default ./gpu-out).
#   scripts/gpu_session.sh BUNDLE_DIR SPEC [SPEC ...]   (sweeps run in order,
#   into one database)
set -uo pipefail
BUNDLE="$(cd "${1:?bundle dir}" && pwd)"
shift
SPECS=("$@")
[ ${#SPECS[@]} -gt 0 ] || { echo "usage: gpu_session.sh BUNDLE_DIR SPEC..." >&2; exit 2; }
OUT="${OUT:-gpu-out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$BUNDLE:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared hosts
# At most a handful of files come back from such a host: keep it to six.
echo "== probe"
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv
  "$BUNDLE/moetune" probe --device all; } 2>&1 | tee "$OUT/probe.txt"
: > "$OUT/sweep.txt"; : > "$OUT/best.txt"
for spec in "${SPECS[@]}"; do
  echo "== sweep $spec"
  "$BUNDLE/moetune" sweep --spec "$spec" --db "$OUT/h200.db" --keep_worker_logs 2>&1 | tee -a "$OUT/sweep.txt"
  echo "sweep exit: ${PIPESTATUS[0]}" | tee -a "$OUT/sweep.txt"
  { echo "== $spec"; "$BUNDLE/moetune" best --db "$OUT/h200.db"; } >> "$OUT/best.txt" 2>&1
done
"$BUNDLE/moetune" sweeps --db "$OUT/h200.db" >> "$OUT/best.txt" 2>&1
"$BUNDLE/moetune" workers --db "$OUT/h200.db" >> "$OUT/best.txt" 2>&1
"$BUNDLE/moetune" results --db "$OUT/h200.db" --format json --samples > "$OUT/results.json" 2>&1
for log in /tmp/moetune-worker-*.log; do
  [ -e "$log" ] && { echo "== $log"; cat "$log"; } >> "$OUT/sweep.txt"
done
echo "== kernel bench"
if [ -x "$BUNDLE/moetune-kernel-bench" ]; then
  "$BUNDLE/moetune-kernel-bench" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/kernel_bench.txt"
  echo "bench exit: ${PIPESTATUS[0]}"
fi
