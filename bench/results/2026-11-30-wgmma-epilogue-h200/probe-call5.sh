#!/usr/bin/env bash
# Call 5: where a wgmma launch's ~5.6 us fixed cost goes, at 64 rows in a PDL chain (experiment
# build: per-block %globaltimer stamps of the chain's last launch).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
for shape in '1.7b o' '1.7b down' '1.7b gate_up' '4b o'; do
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_ONLY=1 \
    DICE_SKINNY_WGMMA_PDL=1 DICE_SKINNY_WGMMA_TILES=64 DICE_SKINNY_WGMMA_SPLITS=1,2,4,6 \
    DICE_WGMMA_TRACE=1 timeout 120 "$(probe_tests)" --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 |
    grep -E "wgmma|trace|copy"
done | tee "$OUT/$PROBE-wgmma-trace.txt"
