#!/usr/bin/env bash
# Call 1: each pass's graph replayed twice (DICE_GRAPH_REPLAYS=2, experiment; the replays are
# idempotent) against once, at 1 sequence (SDAR-4B, SDAR-1.7B) and 16 (SDAR-1.7B): the second
# replay is enqueued while the first runs, so the difference in a pass's device time is the
# GPU time of a replay without the host's launch before it.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=330 \
  probe_variants replays-1 ' ;bin=.device/dice_replay2'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 \
  probe_variants replays-16 ' ;bin=.device/dice_replay2'
