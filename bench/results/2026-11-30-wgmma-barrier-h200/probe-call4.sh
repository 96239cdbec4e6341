#!/usr/bin/env bash
# Call 4: with the wgmma launch's fixed cost lower (0f2ded1 and the relaxed last barrier), do
# shorter blocks now win at 16 sequences? The default (H200: 2,176 k a block, so SDAR-1.7B's qkv
# and lm_head stay on cuBLASLt) against --wgmma-min-block-k 1024 (adds both models' qkv and
# SDAR-1.7B's lm_head) and 0 (every shape the kernel takes), 16 x 1,024, three rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
PROBE=call4
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 probe_variants min-block-k-16 ';--wgmma-min-block-k 1024;--wgmma-min-block-k 0'
