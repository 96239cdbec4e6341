#!/usr/bin/env bash
# Call 1: the marginal cost of each launch of a layer in the real (graphs + PDL) forward at 1
# sequence: each left out in turn (--knockout, an experiment build), SDAR-4B and SDAR-1.7B.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
V=' ;--knockout qk;--knockout norms;--knockout attn;--knockout qkv;--knockout o;--knockout gateup;--knockout down;--knockout qk,norms; '
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=540 probe_variants ko-1 "$V"
