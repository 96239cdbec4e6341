#!/usr/bin/env bash
# Call 2: kernel timelines at 1 sequence (SDAR-4B, SDAR-1.7B), the defaults and the dynamic tail
# at share 0.5 on every launch whose blocks average 4 tiles (lm_head and gate/up), to see which
# kernels moved; then tokens/s at 1 x 4,096, the defaults against the tail on the lm_head only
# and on lm_head and gate/up.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
CONFIGS='4b:1 1.7b:1' NEW_TOKENS=256 PASSES=200 timeout 130 bash bench/device_kernel_timeline.sh \
  >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call2-default-${f##*/}"; done
grep -A14 "one layer" "$OUT/call2-default-timeline.txt"
CONFIGS='4b:1 1.7b:1' NEW_TOKENS=256 PASSES=200 \
  OPTIONS='--stream-dynamic-share 0.5 --stream-dynamic-min-tiles 4' timeout 130 \
  bash bench/device_kernel_timeline.sh >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call2-dynamic-${f##*/}"; done
grep -A14 "one layer" "$OUT/call2-dynamic-timeline.txt"
V=' ;--stream-dynamic-share 0.5;--stream-dynamic-share 0.5 --stream-dynamic-min-tiles 4'
MODELS=4b SEQUENCES=1 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=170 probe_variants 4b-4096 "$V"
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=120 probe_variants 1.7b-4096 "$V"
