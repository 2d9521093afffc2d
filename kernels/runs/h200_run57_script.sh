#!/bin/bash
# Device run 57: version 21 (each matrix its own grid-constant job; h waits cached per slot, acquire loads)
R=$OUT/results.txt; G=.device/g
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $R
timeout 90 $G/v21/moetune-kernel-bench --tiny > $OUT/bench_tiny.txt 2>&1; echo "tiny rc=$?" >> $R
for p in 1 2; do for v in v16 v20 v21; do
  timeout 90 $G/$v/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --graph=both --iterations=300 --no-cpu-check > $OUT/bench_${v}_$p.txt 2>&1; echo "$v/$p rc=$?" >> $R
done; done
MOETUNE_PDL=0 timeout 90 $G/v21/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512 --graph=on --iterations=100 --no-cpu-check > $OUT/bench_v21_nopdl.txt 2>&1; echo "nopdl rc=$?" >> $R
for p in 1 2; do
timeout 90 $G/tl21/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512 --graph=on --iterations=50 --no-cpu-check > $OUT/bench_tl21_$p.txt 2>&1; echo "tl rc=$?" >> $R
done
timeout 150 ncu --clock-control none --kernel-name regex:Fp8LayerKernel --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis $G/v21/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512 --graph=off --iterations=3 --warmup=1 --no-cpu-check > $OUT/ncu21.txt 2>&1; echo "ncu rc=$?" >> $R
cat $R
grep -E "wrong" $OUT/bench_tiny.txt | tail -1
for f in v16_1 v20_1 v21_1 v16_2 v20_2 v21_2 v21_nopdl; do echo "== $f"; grep -E "^fused_gemv_fp8" $OUT/bench_$f.txt | awk '{print $2,$3,$4,$5,$9,$10,$12}'; done
grep -h -E "timeline fused_gemv_fp8|warps" $OUT/bench_tl21_*.txt | grep -A1 "fused_gemv_fp8"
grep -E "Duration|DRAM Throughput|Memory Throughput|Stall|Warp Cycles Per Issued|Issued Warp" $OUT/ncu21.txt | head -30
