#!/bin/bash
# Device run 61: version 23 (fused_gemv_fp8 gate_up streams the shared expert first, its weights copied while the router tail runs) vs v16.
R=$OUT/results.txt; G=.device/g
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $R
echo "== gtest v16 tree (with the EP test)" >> $R; timeout 150 $G/v16/kernels_cuda_test 2>&1 | grep -E "PASSED|FAILED|tests ran|Failure" | head -10 >> $R
echo "== gtest v23" >> $R; timeout 150 $G/v23/kernels_cuda_test 2>&1 | grep -E "PASSED|FAILED|tests ran|Failure|Expected|Which is|rel_l2" | head -30 >> $R
timeout 90 $G/v23/moetune-kernel-bench --tiny > $OUT/bench_tiny.txt 2>&1; echo "tiny rc=$?" >> $R
for t in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $t $G/v23/moetune-kernel-bench --tiny --backends=fused_gemv_fp8 --iterations=2 --warmup=1 --no-cpu-check 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | head -3 >> $R
done
for p in 1 2; do for v in v16 v23; do
  timeout 90 $G/$v/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --graph=both --iterations=300 --no-cpu-check > $OUT/bench_${v}_$p.txt 2>&1; echo "$v/$p rc=$?" >> $R
done; done
for p in 1 2; do
timeout 90 $G/tl23/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512 --graph=on --iterations=50 --no-cpu-check > $OUT/bench_tl23_$p.txt 2>&1; echo "tl rc=$?" >> $R
done
cat $R
grep -E "wrong" $OUT/bench_tiny.txt | tail -1
for f in v16_1 v23_1 v16_2 v23_2 tl23_1 tl23_2; do echo "== $f"; grep -E "^fused_gemv_fp8" $OUT/bench_$f.txt | awk '{print $2,$3,$4,$5,$9,$10,$12}'; done
grep -h -E "timeline fused_gemv_fp8|warps" $OUT/bench_tl23_*.txt | grep -A1 "fused_gemv_fp8"
