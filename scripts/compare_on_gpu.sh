#!/usr/bin/env bash
# Two builds side by side on one GPU host: the decode step and the MoE layer
# benchmarks of each, alternating base, new, base, new in one session so that
# the same clocks and thermals time both, then the new build's GPU tests.
# Each directory holds moetune-step-bench, moetune-kernel-bench and
# kernels_cuda_test with the shared libraries they load beside them
# (deploy/bundle.sh makes such a directory; the GPU host has CUDA and NCCL).
#   scripts/compare_on_gpu.sh BASE_DIR NEW_DIR [OUT_DIR]   (default gpu-compare)
# Output: OUT_DIR/step.txt, moe.txt, tests.txt. STEP_ARGS, MOE_ARGS and
# TEST_FILTER override what is run.
set -uo pipefail
BASE="$(cd "${1:?base build dir}" && pwd)"
NEW="$(cd "${2:?new build dir}" && pwd)"
OUT="${3:-gpu-compare}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared hosts
STEP_ARGS="${STEP_ARGS:---layouts=tp8,ep8 --batches=1,8,32 --contexts=4096 --backend=fused_gemv --graph=on --tile=32x256 --iterations=10}"
MOE_ARGS="${MOE_ARGS:---batches=1,8,32,128 --graph=on --iterations=20}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv \
  > "$OUT/gpu.txt" 2>&1
: > "$OUT/step.txt"
: > "$OUT/moe.txt"
for round in 1 2; do
  for side in base new; do
    dir=$BASE; [ "$side" = new ] && dir=$NEW
    echo "== $side, round $round" | tee -a "$OUT/step.txt" >> "$OUT/moe.txt"
    # shellcheck disable=SC2086
    "$dir/moetune-step-bench" $STEP_ARGS >> "$OUT/step.txt" 2>&1
    echo "exit $?" >> "$OUT/step.txt"
    # shellcheck disable=SC2086
    "$dir/moetune-kernel-bench" $MOE_ARGS >> "$OUT/moe.txt" 2>&1
    echo "exit $?" >> "$OUT/moe.txt"
  done
done
"$NEW/kernels_cuda_test" --gtest_brief=1 ${TEST_FILTER:+--gtest_filter=$TEST_FILTER} \
  > "$OUT/tests.txt" 2>&1
echo "tests exit: $?" | tee -a "$OUT/tests.txt"
