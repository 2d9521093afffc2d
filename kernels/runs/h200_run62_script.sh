#!/bin/bash
# Device run 62: the committed kernels (version 16) with options.chain_layers: layers back to back, per layer.
R=$OUT/results.txt; G=.device/g/chain
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,memory.used --format=csv,noheader >> $R
echo "== gtest" >> $R; timeout 180 $G/kernels_cuda_test 2>&1 | grep -E "PASSED|FAILED|tests ran|Failure|Expected|Which is" | head -20 >> $R
timeout 60 compute-sanitizer --tool memcheck $G/moetune-kernel-bench --tiny --chain=3 --backends=fused_gemv,fused_gemv_fp8,grouped_mma --iterations=2 --warmup=1 --no-cpu-check 2>&1 | grep -E "ERROR SUMMARY|summary" | head -3 >> $R
for c in 1 8 4 1 8; do
  timeout 120 $G/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512,128x256 --graph=both --iterations=200 --no-cpu-check --chain=$c > $OUT/b1_chain$c.$RANDOM.txt 2>&1; echo "b1 chain $c rc=$?" >> $R
done
for c in 1 8; do
  timeout 150 $G/moetune-kernel-bench --batches=1,8,32 --backends=fused_gemv --tiles=16x512,32x256 --graph=both --iterations=100 --no-cpu-check --chain=$c > $OUT/fg_chain$c.txt 2>&1; echo "fused_gemv chain $c rc=$?" >> $R
done
cat $R
for f in $OUT/b1_chain*.txt $OUT/fg_chain*.txt; do echo "== $(basename $f)"; grep -E "^timing|^fused_gemv" $f | awk '{print $1,$2,$3,$4,$5,$9,$10,$12}'; done
