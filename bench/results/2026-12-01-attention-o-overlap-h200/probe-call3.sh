#!/usr/bin/env bash
# Call 3: the kept form (stage_o_batch_rounds = 2 by default): the bit-comparing staging, PDL and
# bad-option tests, one round against the base build (145083d: the staging all at once), then
# issue 6's four SDAR-4B 1-sequence rows (1,024 and 4,096 new tokens, fused and unfused store)
# with the PyTorch column.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 150 'CudaOps.SkinnyGemmStagedWeightsGiveTheSameBits:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.BadInputIsRejectedAndNothingCommitted' || exit 1
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=120 probe_variants \
  kept 'bin=.device/dice_base; '
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused BENCH_LIMIT=280 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=1 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-1.*; do mv "$f" "$OUT/call3-${f##*/}"; done
cat "$OUT/call3-engine-bench-1.txt"
