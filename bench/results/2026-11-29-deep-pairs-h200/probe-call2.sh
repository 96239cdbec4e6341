#!/usr/bin/env bash
# Call 2: why the deep paired attention is slower in SDAR-4B's 16 x 1,024 decoding than the
# pipelined kernel (call 1) although faster per launch: Nsight Compute over the attention
# launches only (--kernel-name regex, serialised, L2 as left) of a 16-sequence run with fused
# store passes at ~1,000-1,064 positions, with and without --deep-attention-pairs; and the
# backend test with its corrected prompt for the deep paired kernel.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
PROBE=call2
probe_unpack_tests
timeout 120 .device/dice_engine_cuda_tests --gtest_filter='CudaBackendTest.DeepAndPairedAttention*' > "$OUT/$PROBE-backend-test.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-backend-test.txt"; grep -m3 -A6 "Failure" "$OUT/$PROBE-backend-test.txt"
m="$WORK/models/4b"
mkdir -p "$WORK/models"
[ -f "$m/config.json" ] || "$DICE" model random --config .device/shared/configs/sdar-4b-chat.json --dtype bf16 --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for opt in "" "--no-deep-attention-pairs"; do
  start=$SECONDS
  f="$OUT/$PROBE-ncu-attention${opt:+-nopairs}.csv"
  timeout 200 "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --kernel-name regex:attention --launch-skip 1800 --launch-count 600 \
    "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
    --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 48 $opt > "$f" 2>"$f.err"
  echo "ncu '$opt' exit $? in $((SECONDS - start)) s"
  python3 - "$f" <<'PY'
import csv, sys, statistics, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = collections.defaultdict(list)
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    v = float(r["Metric Value"].replace(",", "")); unit = r.get("Metric Unit", "")
    us = v / 1000 if unit in ("nsecond", "ns") else v * 1000 if unit in ("msecond", "ms") else v
    name = r["Kernel Name"].split("(")[0]
    grid = r.get("Grid Size", "")
    by[(name, grid)].append(us)
for (name, grid), xs in sorted(by.items()):
    print(f"{name:60s} grid {grid:>14s} launches {len(xs):4d} mean {statistics.mean(xs):8.2f} us median {statistics.median(xs):8.2f} min {min(xs):8.2f} max {max(xs):8.2f}")
PY
done
