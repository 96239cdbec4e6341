#!/usr/bin/env bash
# Call 1: the GPU tests of 8ce04d8/cbe75c4, the attention split options at 16 sequences, and
# Nsight Compute on the deep attention kernel at 16 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
CHECK_LIMIT=230 bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call1-check-tests.txt"
grep -c '^PASS' "$OUT/call1-check-tests.txt"; grep -v '^PASS' "$OUT/call1-check-tests.txt" | head -20
echo "tests took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=170 \
  VARIANTS=';--no-deep-attention-pipeline;--no-deep-attention-pipeline --attention-split-cost 0;--no-deep-attention-pipeline --attention-split-cost 256' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call1-variants-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call1-variants-16.jsonl"
grep -A20 "mean tokens" "$OUT/call1-variants-16.txt"
echo "variants took $((SECONDS - start)) s"
start=$SECONDS
MODEL=1.7b SEQUENCES=16 PROMPT_LENGTH=576 ATTN_SKIP=900 ATTN_LAUNCHES=1 timeout 120 bash bench/device_attention_ncu.sh > /dev/null 2>&1
cp "$OUT/attention-ncu.txt" "$OUT/call1-attention-ncu-16.txt"
grep -E "Duration|DRAM Throughput|Memory Throughput|Stall|Registers|Achieved Occupancy|Grid Size|Block Size" "$OUT/call1-attention-ncu-16.txt" | head -30
echo "ncu took $((SECONDS - start)) s"
