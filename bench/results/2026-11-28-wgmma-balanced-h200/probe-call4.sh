#!/usr/bin/env bash
# Call 4: the balanced launch at as many blocks as the cluster launch (the same chunks a block,
# blocks placed freely, partials met in global memory) against the cluster launch, per shape at
# 64 rows; Nsight Compute's per-SM spread of that launch on SDAR-4B's down projection.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
CHECK_LIMIT=150 CHECK_TESTS='CudaOps.Wgmma*:CudaBackendTest.WgmmaGemm*' bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call4-check-tests.txt" 2>/dev/null
grep -E "PASS|FAIL" "$OUT/call4-check-tests.txt" | tail -8
echo "checks took $((SECONDS - start)) s"
for shape in "4b down" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up" "1.7b o" "1.7b qkv"; do
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_WGMMA_ONLY=1 \
    timeout 100 .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running|^shape' | grep -E "balanced|\*|copy"
done > "$OUT/call4-timings-64.txt"
cat "$OUT/call4-timings-64.txt"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
metrics=gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,sm__ctas_launched.min,sm__ctas_launched.max,sm__ctas_launched.sum,dram__bytes_read.sum
for spec in "4b down:64:4:balanced:773" "4b down:64:4:wgmma_gemm:1"; do
  IFS=: read -r shape tile splits kernel skip <<<"$spec"
  echo "== ncu $kernel $shape t$tile (cluster s$splits; balanced grids 132,264,396,528,rule)"
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_WGMMA_ONLY=1 \
    DICE_SKINNY_WGMMA_TILES=$tile DICE_SKINNY_WGMMA_SPLITS=$splits \
    timeout 120 "$ncu" --clock-control none --metrics "$metrics" -k regex:$kernel --launch-skip $skip --launch-count 2 --csv --page raw \
    .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -E '^"' > "$OUT/call4-ncu-$kernel.csv"
  python3 - "$OUT/call4-ncu-$kernel.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
for r in rows[2:]:
    d = dict(zip(head, r))
    print(d.get("Grid Size"), {k: d[k] for k in head if k.startswith(("gpu__", "sm__", "dram__"))})
PY
done
