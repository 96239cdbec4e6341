#!/usr/bin/env bash
# Call 7: the knockouts of call 1 (an experiment build, extended to the folded-norm and bf16
# gate/up paths) at 16 and 128 sequences, SDAR-1.7B: each launch's marginal cost there.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call7
V=' ;--knockout qk;--knockout norms;--knockout attn;--knockout qkv;--knockout o;--knockout gateup;--knockout swiglu;--knockout down'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=150 probe_variants ko-16 "$V"
MODELS=1.7b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=190 probe_variants ko-128 "$V"
