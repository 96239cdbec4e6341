#!/usr/bin/env bash
# Call 2: as call 1, the ops test's copies of the starting residual now on the test's stream (call 1's
# synchronous copies raced its launches), then SDAR-4B tokens/s at 1 x 1,024 against the base
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 120 'CudaOps.StreamMlp*' || exit 1
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 \
  probe_variants mlp-4b 'bin=.device/dice_base; ;--stream-mlp'
