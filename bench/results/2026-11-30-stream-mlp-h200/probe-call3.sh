#!/usr/bin/env bash
# Call 3: where --stream-mlp loses (call 2: 0.911x): the base and the new build with and without
# PDL (without it no kernel starts before the one before it ends, so the overlap the persistent
# launch gives up, the o projection's weights staged during the attention, is gone for both).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=400 \
  probe_variants nopdl-4b 'bin=.device/dice_base; ;--stream-mlp;bin=.device/dice_base --no-pdl;--no-pdl;--no-pdl --stream-mlp'
