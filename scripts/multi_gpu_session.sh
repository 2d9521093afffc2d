#!/usr/bin/env bash
# The multi-GPU runs (real communication between GPUs of one host: the
# device tool's nvidia-h200-x2, -x4 or -x8), from a bundle made by
# deploy/bundle.sh, in two calls that each fit a device call's 10 minutes:
#   comm   the topology; nccl-tests-style figures of both all-reduces (and
#          data-parallel attention's all-gather and reduce-scatter) from 1 KB
#          to 64 MB over every GPU, with the calibration file the
#          communication model is fed; the gang tests, where kernels_cuda_test
#          was copied into the bundle.
#   sweep  SPEC (default deploy/h200x8_gang_sweep.json) at this host's GPU
#          count (worldSize set to it: the plan keeps the tp x ep that make
#          it), MEASURED communication, an embedded coordinator and one worker
#          a GPU, the comm call's calibration handed to every worker (when
#          it is in $OUT); then the winners and every result as JSON.
#   scripts/multi_gpu_session.sh BUNDLE_DIR comm|sweep [SPEC]
# Everything lands in $OUT (default ./multi-gpu-out). NVLink multicast stays
# off: on shared hosts it can take every GPU out of service.
set -uo pipefail
BUNDLE="$(cd "${1:?bundle dir}" && pwd)"
PART="${2:?comm or sweep}"
SPEC="${3:-$(cd "$(dirname "$0")/.." && pwd)/deploy/h200x8_gang_sweep.json}"
OUT="${OUT:-multi-gpu-out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$BUNDLE:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
echo "== $GPUS GPUs"

comm() {
  nvidia-smi topo -m > "$OUT/topology.txt" 2>&1
  "$BUNDLE/moetune-comm-bench" --gpus="$GPUS" --impl=nccl,oneshot \
    --min_bytes=1024 --max_bytes=67108864 \
    --ops=allreduce,allgather,reducescatter --graph_bytes=12288,24576 \
    --calibration="$OUT/comm_calibration.json" 2>&1 | tee "$OUT/comm_bench.txt"
  echo "comm bench exit: ${PIPESTATUS[0]}"
  if [ -x "$BUNDLE/kernels_cuda_test" ]; then
    "$BUNDLE/kernels_cuda_test" --gtest_filter='StepGangGpuTest.*:CommGpuTest.*' \
      > "$OUT/gang_tests.txt" 2>&1
    echo "gang tests exit: $?"
    grep -E "^\[  (PASSED|FAILED)" "$OUT/gang_tests.txt"
  fi
}

sweep() {
  local spec="$OUT/sweep_spec.json"
  python3 - "$SPEC" "$spec" "$GPUS" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["space"]["worldSize"] = int(sys.argv[3])
spec["name"] = spec.get("name", "gang") + "-world" + sys.argv[3]
json.dump(spec, open(sys.argv[2], "w"), indent=2)
PY
  local calibration=()
  [ -f "$OUT/comm_calibration.json" ] &&
    calibration=(--comm_calibration "$OUT/comm_calibration.json")
  "$BUNDLE/moetune" sweep --spec "$spec" --db "$OUT/multi_gpu.db" \
    --keep_worker_logs "${calibration[@]}" 2>&1 | tee "$OUT/sweep.txt"
  echo "sweep exit: ${PIPESTATUS[0]}"
  "$BUNDLE/moetune" best --db "$OUT/multi_gpu.db" > "$OUT/best.txt" 2>&1
  "$BUNDLE/moetune" results --db "$OUT/multi_gpu.db" --format json --samples \
    > "$OUT/results.json" 2>&1
  cat "$OUT/best.txt"
}

case "$PART" in
  comm) comm ;;
  sweep) sweep ;;
  *) echo "multi_gpu_session.sh: part must be comm or sweep, got '$PART'" >&2
     exit 2 ;;
esac
