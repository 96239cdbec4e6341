#!/usr/bin/env bash
# Call 5: on the machine of calls 3 and 4, the defaults (the dynamic tail on the lm_head) against
# --stream-dynamic-share 0 (off), alternating, three rounds: SDAR-1.7B and SDAR-4B at 1 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call5
V=' ;--stream-dynamic-share 0'
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=150 probe_variants 1.7b "$V"
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=170 probe_variants 4b "$V"
rm -f "$OUT"/engine-variants.*
