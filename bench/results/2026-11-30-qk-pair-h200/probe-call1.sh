#!/usr/bin/env bash
# Call 1: the q/k epilogue at tile_n 64 (a head vector's two column tiles in one cluster with
# their splits): the bit-for-bit checks (tile_n 64 and 128), the other wgmma tests, then
# tokens/s at 16 x 1,024 against the base (80120bb, q/k kernel): --fused-qk-norm-rope (tile 64,
# the rule's splits), an experiment build with one split more at tile 64 (dice_s3), and tile 128.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 150 'CudaOps.WgmmaQkRope*:CudaOps.Wgmma*:CudaBackendTest.QkRope*' || exit 1
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=380 \
  probe_variants qk-16 'bin=.device/dice_base;--fused-qk-norm-rope;bin=.device/dice_s3.xz --fused-qk-norm-rope;--fused-qk-norm-rope --fused-qk-norm-rope-tile 128'
