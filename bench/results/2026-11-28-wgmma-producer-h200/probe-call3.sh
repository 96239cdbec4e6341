#!/usr/bin/env bash
# Call 3: SDAR-4B at 16 sequences and ~2,000 positions traced inside its CUDA graphs (Nsight
# Systems, bench/device_engine_timeline.sh): each kernel's time where it ran and the gaps.
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL=4b SEQUENCES=16 PROMPT_LENGTH=2000 NEW_TOKENS=64 timeout 400 bash bench/device_engine_timeline.sh > /dev/null 2>&1
cp "$OUT/engine-timeline.txt" "$OUT/call3-timeline-4b-16-2000.txt"
mv "$OUT/engine-timeline.csv.gz" "$OUT/call3-timeline-4b-16-2000.csv.gz" 2>/dev/null
tail -40 "$OUT/call3-timeline-4b-16-2000.txt"
