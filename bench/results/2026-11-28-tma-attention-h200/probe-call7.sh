#!/usr/bin/env bash
# Call 7: per-kernel time of SDAR-4B decoding forwards at 16 sequences and ~2,000 positions
# (Nsight Compute, duration only, no graphs): where the row nearest 1.5x (16 x 4,096) spends it.
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL=4b PROFILE_SEQUENCES=16 PROMPT_LENGTH=2000 GRAPHS=0 KERNELS=new NCU_KERNELS=700 timeout 170 bash bench/device_engine_profile.sh > /dev/null 2>&1
cp "$OUT/engine-profile.log" "$OUT/call7-profile-4b-16-2000.txt"
tail -30 "$OUT/call7-profile-4b-16-2000.txt"
