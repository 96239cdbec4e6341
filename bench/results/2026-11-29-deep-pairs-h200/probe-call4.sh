#!/usr/bin/env bash
# Call 4: per-launch attention times on the fused store passes' shape (8 rows a sequence, 16
# sequences) with the sequences' pages contiguous and interleaved (DICE_ATTENTION_INTERLEAVE, as
# sequences that grew together have them); then every GPU test of this build.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
for il in "" 1; do
  f="$OUT/$PROBE-attention-timings${il:+-interleaved}.txt"
  if [ -n "$il" ]; then export DICE_ATTENTION_INTERLEAVE=1; else unset DICE_ATTENTION_INTERLEAVE; fi
  DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=1024,2048,4096 \
    timeout 120 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -vE '^\[|^Note|^$' > "$f"
  [ -z "$il" ] && sed -i '1i pages contiguous per sequence' "$f" || sed -i '1i pages interleaved (DICE_ATTENTION_INTERLEAVE=1)' "$f"
  cat "$f"
done
start=$SECONDS
probe_checks 420 '*'
echo "checks took $((SECONDS - start)) s"
