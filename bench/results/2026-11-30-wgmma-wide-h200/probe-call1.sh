#!/usr/bin/env bash
# Call 1: the split path's merged finish (checks, 4 rows timing, 4B 1 x 1,024 against the base
# build), and the wgmma kernel's 128-wide tiles at 64 rows (per launch, every split, PDL; then
# 16 x 1,024 with the experiment build's DICE_EXP_WGMMA_T128).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
probe_unpack_tests
probe_checks 200 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemmSplit*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings split-4 '4b down' '4b o'
DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_WGMMA_PDL=1 probe_timings wgmma-64 \
  '1.7b o' '1.7b down' '1.7b gate_up' '4b o' '4b down' '4b gate_up'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 probe_variants merge-4b ' ;bin=.device/dice_base.xz'
xz -dc .device/dice_exp.xz > .device/dice_exp && chmod +x .device/dice_exp
printf '#!/usr/bin/env bash\nDICE_EXP_WGMMA_T128=1 exec "$(dirname "$0")/dice_exp" "$@"\n' > .device/dice_t128a && chmod +x .device/dice_t128a
printf '#!/usr/bin/env bash\nDICE_EXP_WGMMA_T128=2 exec "$(dirname "$0")/dice_exp" "$@"\n' > .device/dice_t128b && chmod +x .device/dice_t128b
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=240 probe_variants t128-16 ' ;bin=.device/dice_t128a;bin=.device/dice_t128b'
