#!/usr/bin/env bash
# Call 7: is the deep paired attention slower inside decoding because the KV cache spans the whole
# GPU (122 GiB; call 5: 40.8 us, DRAM 37% of peak, against 30.0 us and 48% for the same
# instructions in the timing test's 3.7 GB of cache, call 6)? The same Nsight Compute run as call
# 5 with --gpu-memory 16GiB (a ~7 GiB cache), then tokens/s at SDAR-4B 16 x 4,096 with a 24 GiB
# limit (a ~15 GiB cache, the 16 sequences fit) against the whole GPU, deep pairs on and off.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
PROBE=call7
m="$WORK/models/4b"
mkdir -p "$WORK/models"
[ -f "$m/config.json" ] || "$DICE" model random --config .device/shared/configs/sdar-4b-chat.json --dtype bf16 --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
for mem in 16GiB; do
  start=$SECONDS
  f="$OUT/$PROBE-ncu-forward-$mem.csv"
  timeout 200 "$ncu" --clock-control none --cache-control none --metrics "$metrics" \
    --csv --kernel-name regex:attention --launch-skip 1800 --launch-count 300 \
    "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
    --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 48 --deep-attention-pairs-min-keys 0 \
    --gpu-memory "$mem" > "$f" 2>"$f.err"
  echo "ncu forward --gpu-memory $mem exit $? in $((SECONDS - start)) s"
  python3 - "$f" <<'PY' | tee "${f%.csv}.txt"
import csv, sys, statistics, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    try: v = float(r["Metric Value"].replace(",", ""))
    except ValueError: continue
    by[(r["Kernel Name"].split("(")[0][-40:], r.get("Grid Size", ""))][(r["Metric Name"], r.get("Metric Unit", ""))].append(v)
for (name, grid), ms in sorted(by.items()):
    n = len(next(iter(ms.values())))
    print(f"{name} grid {grid} launches {n}")
    for (metric, unit), xs in sorted(ms.items()):
        print(f"    {metric:75s} {unit:10s} median {statistics.median(xs):14.2f}")
PY
done
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=200 probe_variants 4b-16x4096 ";--gpu-memory 24GiB;--gpu-memory 24GiB --no-deep-attention-pairs;--no-deep-attention-pairs"
