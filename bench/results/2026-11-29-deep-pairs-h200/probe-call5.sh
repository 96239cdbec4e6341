#!/usr/bin/env bash
# Call 5: why the deep paired attention is slower inside decoding than per launch. Nsight Compute
# (duration, SM clock, DRAM throughput, tensor pipe activity) over the attention launches of
# a 16-sequence SDAR-4B run with fused store passes at ~1,000-1,100 positions, deep pairs from
# 0 positions.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
PROBE=call5
probe_unpack_tests
m="$WORK/models/4b"
mkdir -p "$WORK/models"
[ -f "$m/config.json" ] || "$DICE" model random --config .device/shared/configs/sdar-4b-chat.json --dtype bf16 --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
report() {
  python3 - "$1" <<'PY'
import csv, sys, statistics, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    try: v = float(r["Metric Value"].replace(",", ""))
    except ValueError: continue
    by[(r["Kernel Name"].split("(")[0], r.get("Grid Size", ""))][(r["Metric Name"], r.get("Metric Unit", ""))].append(v)
for (name, grid), ms in sorted(by.items()):
    n = len(next(iter(ms.values())))
    print(f"{name} grid {grid} launches {n}")
    for (metric, unit), xs in sorted(ms.items()):
        print(f"    {metric:75s} {unit:10s} median {statistics.median(xs):14.2f}")
PY
}
start=$SECONDS
f="$OUT/$PROBE-ncu-forward.csv"
timeout 200 "$ncu" --clock-control none --cache-control none --metrics "$metrics" \
  --csv --kernel-name regex:attention --launch-skip 1800 --launch-count 400 \
  "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
  --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 48 --deep-attention-pairs-min-keys 0 > "$f" 2>"$f.err"
echo "ncu forward exit $? in $((SECONDS - start)) s"
report "$f" | tee "$OUT/$PROBE-ncu-forward.txt"
# The interleaved-pages timing test with its reference on the sequence's own pages (the call-4
# failures were the reference's, which read the pages as if contiguous).
DICE_ATTENTION_INTERLEAVE=1 DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=1024 \
  timeout 60 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -vE '^Note|^$' > "$OUT/$PROBE-attention-timings-interleaved.txt"
grep -E "PASSED|FAILED|^4b|^1.7b" "$OUT/$PROBE-attention-timings-interleaved.txt"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";--no-deep-attention-pairs"
