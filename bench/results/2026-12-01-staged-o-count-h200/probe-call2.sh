#!/usr/bin/env bash
# Call 2: the bench record's staged_o_gemms on SDAR-4B 1 x 256 (one round; a check of the
# counter in a real forward, not a speed measurement).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
MODELS=4b SEQUENCES=1 NEW_TOKENS=256 REPEATS=1 VARIANTS_LIMIT=100 probe_variants 4b-256 ' ;--no-stage-o-weights'
grep -o '"staged_o_gemms":[0-9]*\|"stage_o_weights":[a-z]*' "$OUT/$PROBE-variants-4b-256.jsonl"
