#!/usr/bin/env bash
# Call 5: is 4 s of back-to-back GEMMs long enough for the sustained rate? The ceilings line of
# `dice engine bench` with 4, 12 and again 4 s (tiny model, so the bench itself is short).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/common_device.sh
source bench/engine_device.sh
"$DICE" model random --config tiny --out "$WORK/tiny" --no-tokenizer --force >/dev/null
TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 200 >"$OUT/call5-clocks.csv" 2>&1 &
smi=$!
for s in 4 12 4 1; do
  "$DICE" engine bench --model "$WORK/tiny" --sequences 1 --new-tokens 8 --store fused \
    --sustained-gemm-seconds "$s" 2>&1 >/dev/null | grep ceilings | tee -a "$OUT/call5-sustained.txt"
done
kill "$smi"
