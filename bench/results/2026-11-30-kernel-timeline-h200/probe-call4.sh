#!/usr/bin/env bash
# Call 4: the kept form, CudaBackendOptions::input_norm_early_trigger (on) and
# post_norm_early_trigger (off): the bit-comparing PDL tests (both norms early, neither, the
# default), then SDAR-1.7B 1 x 1,024 against the base build (bd07a46) as long as time is left.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
probe_checks 170 'CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.EarlyStartAfterCublasChangesNoBits:CudaOps.RmsNorm*' || exit 1
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=90 probe_variants \
  norm-trigger-kept 'bin=.device/dice_base; '
