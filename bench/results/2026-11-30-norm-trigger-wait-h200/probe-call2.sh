#!/usr/bin/env bash
# Call 2: the kept form (d8ebccb: post_norm_trigger after-wait, input_norm_trigger before-wait):
# the bit-comparing norm and PDL tests, one round against the base build (a605cbc: the post norm
# after its row read), then issue 6's eight 1-sequence rows (both models, 1,024 and 4,096 new
# tokens, fused and unfused store) with the PyTorch column, as long as the call's time allows.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 120 'CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.EarlyStartAfterCublasChangesNoBits:CudaOps.RmsNorm*' || exit 1
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=120 probe_variants \
  kept 'bin=.device/dice_base; '
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused BENCH_LIMIT=330 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=1 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-1.*; do mv "$f" "$OUT/call2-${f##*/}"; done
cat "$OUT/call2-engine-bench-1.txt"
