#!/bin/bash
# Device run 63: the committed tree as a bundle: the chained sweep (8 MoE layers back to back a trial)
# through the embedded coordinator + worker + SQLite, then the kernel bench with --chain=8.
B=.device/bundle; R=$OUT/results.txt
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $R
BENCH_ARGS="--batches=1,8,32 --backends=fused_gemv,fused_gemv_fp8,grouped_mma --graph=on --chain=8 --no-cpu-check" OUT=$OUT timeout 540 scripts/gpu_session.sh $B deploy/h200_chain_sweep.json > $OUT/session.txt 2>&1; echo "session rc=$?" >> $R
cat $R
grep -E "^fused|^grouped|^dequant|summary|bandwidth|^timing" $OUT/kernel_bench.txt | grep -v "not run" | awk '{print $1,$2,$3,$4,$5,$9,$10,$12}'
tail -45 $OUT/best.txt
