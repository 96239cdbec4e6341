#!/usr/bin/env bash
# Call 2: every GPU test of the engine on the early reads (CHECK_LIMIT 240 s), then tokens/s at
# SDAR-1.7B 128 x 1,024 against the build before it (d4a835a).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 240 '*' || exit 1
MODELS=1.7b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=80 \
  probe_variants early-128 'bin=.device/dice_base.xz; '
