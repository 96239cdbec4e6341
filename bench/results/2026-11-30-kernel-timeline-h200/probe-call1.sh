#!/usr/bin/env bash
# Call 1: the first kernel timelines (engine/cuda/tools/kernel_timeline.cpp under
# bench/device_kernel_timeline.sh): SDAR-4B and SDAR-1.7B at 1 sequence, SDAR-1.7B at 16,
# 256 new tokens, fused store; each also run plain for its tokens/s.
set -uo pipefail
cd "$(dirname "$0")/../../.."
CONFIGS='4b:1 1.7b:1 1.7b:16' NEW_TOKENS=256 PASSES=200 timeout 560 bash bench/device_kernel_timeline.sh
