#!/usr/bin/env bash
# Call 3: is the 16-sequence drop of call 2 (SDAR-1.7B 16 x 4,096 1.561 / 1.526 against the
# table's 1.539 / 1.501) the code or the machine? b7f2eeb (dice) against 2826a22 (dice_base, the
# code of the table's 16-sequence rows, ../2026-11-30-norm-trigger-wait-h200 call 5), alternating
# per round: SDAR-1.7B 16 x 4,096 fused, then 16 x 1,024 on both models.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
V=' ;bin=.device/dice_base'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=200 probe_variants 1.7b-16-4096 "$V"
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 probe_variants 16-1024 "$V"
