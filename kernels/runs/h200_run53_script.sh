#!/bin/bash
# Device run 53: version 17 (gate_up routes its token from the router's scores) vs version 16,
# gtest, tiny bench all backends, sanitizers on fp8 tiny, timeline of v17.
R=$OUT/results.txt; G=.device/g
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $R
echo "== gtest v17" >> $R; timeout 150 $G/v17/kernels_cuda_test 2>&1 | grep -E "PASSED|FAILED|tests ran|Failure|Expected|Which is" | head -20 >> $R
timeout 90 $G/v17/moetune-kernel-bench --tiny > $OUT/bench_tiny.txt 2>&1; echo "tiny rc=$?" >> $R
for t in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $t $G/v17/moetune-kernel-bench --tiny --backends=fused_gemv_fp8 --iterations=2 --warmup=1 --no-cpu-check 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | head -3 >> $R
done
for p in 1 2; do for v in v16 v17; do
  timeout 90 $G/$v/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --graph=both --iterations=200 --no-cpu-check > $OUT/bench_${v}_$p.txt 2>&1; echo "$v/$p rc=$?" >> $R
done; done
timeout 90 $G/tl/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512 --graph=on --iterations=50 --no-cpu-check > $OUT/bench_tl.txt 2>&1; echo "tl rc=$?" >> $R
cat $R
grep -E "wrong|^fused_gemv_fp8" $OUT/bench_tiny.txt | tail -3
for f in v16_1 v17_1 v16_2 v17_2; do echo "== $f"; grep -E "^fused_gemv_fp8" $OUT/bench_$f.txt | awk '{print $2,$3,$4,$5,$9,$10,$12}'; done
grep -E "timeline|warps" $OUT/bench_tl.txt
