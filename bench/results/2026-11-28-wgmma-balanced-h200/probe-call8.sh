#!/usr/bin/env bash
# Call 8: 128 k a stage in decoding where issue 6's rows are nearest 1.5x: SDAR-4B 16 x 4,096,
# and SDAR-1.7B 16 x 1,024 with the wgmma kernel on its down and gate/up projections
# (--wgmma-min-block-k 1536) at 64 and 128 k a stage.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=200 \
  VARIANTS=';--wgmma-stage-k 128' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call8-variants-4b-16x4096.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call8-variants-4b-16x4096.jsonl"
grep -A4 "mean tokens" "$OUT/call8-variants-4b-16x4096.txt"
echo "4b took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=120 \
  VARIANTS=';--wgmma-stage-k 128;--wgmma-min-block-k 1536;--wgmma-stage-k 128 --wgmma-min-block-k 1536' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call8-variants-1.7b-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call8-variants-1.7b-16.jsonl"
grep -A6 "mean tokens" "$OUT/call8-variants-1.7b-16.txt"
echo "1.7b took $((SECONDS - start)) s"
