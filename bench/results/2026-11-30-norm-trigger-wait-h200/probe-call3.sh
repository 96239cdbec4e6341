#!/usr/bin/env bash
# Call 3: SDAR-4B 1 x 1,024 with and without the o projection's weights staged in shared memory
# during the attention (stage_o_weights): in the kernel timeline SDAR-4B's attention takes
# 11.4 us a layer against SDAR-1.7B's 7.6, while the skinny o blocks beside it copy 21 MB.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 probe_variants \
  stage-o ' ;--no-stage-o-weights'
