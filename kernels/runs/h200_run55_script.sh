#!/bin/bash
# Device run 55: v16 vs v18 vs v19 (bias preloaded before polling), timeline stamps inside gate_up's routing.
R=$OUT/results.txt; G=.device/g
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $R
timeout 90 $G/v19/moetune-kernel-bench --tiny --backends=fused_gemv_fp8 > $OUT/bench_tiny.txt 2>&1; echo "tiny rc=$?" >> $R
for p in 1 2; do for v in v16 v18 v19; do
  timeout 90 $G/$v/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512,128x256 --graph=on --iterations=300 --no-cpu-check > $OUT/bench_${v}_$p.txt 2>&1; echo "$v/$p rc=$?" >> $R
done; done
for t in tl tl19; do for p in 1 2; do
timeout 90 $G/$t/moetune-kernel-bench --batches=1 --backends=fused_gemv_fp8 --tiles=128x512 --graph=on --iterations=50 --no-cpu-check > $OUT/bench_${t}_$p.txt 2>&1; echo "$t rc=$?" >> $R
done; done
cat $R
grep -E "wrong" $OUT/bench_tiny.txt | tail -1
for f in v16_1 v18_1 v19_1 v16_2 v18_2 v19_2; do echo "== $f"; grep -E "^fused_gemv_fp8" $OUT/bench_$f.txt | awk '{print $2,$3,$4,$5,$9,$10,$12}'; done
grep -h -E "timeline fused_gemv_fp8|warps" $OUT/bench_tl*_*.txt | grep -A1 "fused_gemv_fp8"
