#!/usr/bin/env bash
# Call 1: the qkv projection at 64 rows (16 sequences) per launch: cuBLASLt against the wgmma
# kernel at tile widths 64 and 128 and every split count, under PDL with early weights; then
# SDAR-1.7B 16 x 1,024 tokens/s with qkv on the wgmma kernel (experiment build, DICE_EXP_QKV_TILE
# through the wrappers .device/dice_q64 / dice_q128) against the base (HEAD 3c9c511).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
for t in 64 128; do
  printf '#!/usr/bin/env bash\nDICE_EXP_QKV_TILE=%s exec "$(dirname "$0")/dice" "$@"\n' $t > .device/dice_q$t
  chmod +x .device/dice_q$t
done
DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_PDL=1 DICE_SKINNY_WGMMA_TILES=64,128 \
  probe_timings qkv '1.7b qkv' '4b qkv'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=330 \
  probe_variants qkv-1.7b 'bin=.device/dice_base;bin=.device/dice_q64;bin=.device/dice_q128'
