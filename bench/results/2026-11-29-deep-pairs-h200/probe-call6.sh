#!/usr/bin/env bash
# Call 6: the per-launch timing test's own deep paired launches (SDAR-4B heads, 16 x 1,024, store
# passes' shape) under Nsight Compute with call 5's metrics, to compare with the same kernel
# inside decoding (call 5: 40.8 us, DRAM 37% of peak; the test's graph replays: 28.6 us). Only the
# first 3 launches of SDAR-4B's deep and deep_pair variants are profiled (ncu counts the graph
# replays' kernel nodes: 309 launches a variant).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
start=$SECONDS
for skip in 7725 8961; do  # SDAR-4B deep, deep_pair (309 launches a variant, graph nodes counted)
  il=""
  if [ -n "$il" ]; then export DICE_ATTENTION_INTERLEAVE=1; else unset DICE_ATTENTION_INTERLEAVE; fi
  f="$OUT/$PROBE-ncu-timing-test-skip$skip.csv"
  DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=1024 \
  timeout 150 "$ncu" --clock-control none --cache-control none --metrics "$metrics" --csv \
    --kernel-name regex:attention_mma_pipelined \
    --launch-skip $skip --launch-count 3 \
    .device/dice_engine_cuda_tests --gtest_filter=CudaOps.AttentionTimings > "$f" 2>"$f.err"
  echo "ncu '$il' exit $? in $((SECONDS - start)) s"
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
