#!/usr/bin/env bash
# Call 5: every GPU test on the session's code (the experiment's switch unset: the code of
# a1e9b74 and the last session's review mend, which had only compiled), then the deep attention
# at 1 sequence for long contexts (experiment commit, DICE_EXP_DEEP_MIN_KEYS): its backend checks
# with every few-tile pass on it, and tokens/s at SDAR-4B 1 x 4,096.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call5-all
probe_checks 225 '*'
PROBE=call5-deep
DICE_EXP_DEEP_MIN_KEYS=1 probe_checks 60 \
  'CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.SeededSamplingReproducesRunToRun:CudaBackendTest.GraphsAndChunkedPrefillDoNotChangeLogits' || exit 1
PROBE=call5
probe_env_wrapper dice_deep1024 'DICE_EXP_DEEP_MIN_KEYS=1024'
MODELS=4b SEQUENCES=1 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=110 probe_variants deep-1-4096 \
  ' ;bin=.device/dice_deep1024'
