#!/usr/bin/env bash
# Call 1: the RMSNorm folds (fold_norms, default on): their checks (ops, backend logits), then
# SDAR-4B and SDAR-1.7B tokens/s at 16 x 1,024 and SDAR-4B at 16 x 4,096, defaults against
# --no-fold-norms, same binary, alternating rounds. (Reconstructed: the call stopped after the
# checks, one of which failed; call 2 ran the variants.)
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 150 'CudaOps.WgmmaGemmNormFold*:CudaOps.QkNormRope*:CudaBackendTest.FoldedNorms*:CudaBackendTest.WgmmaGemm*:CudaOps.WgmmaGemmSwiglu*:CudaOps.WgmmaGemmMatches*:CudaBackendTest.LogitsMatch*' || { echo "checks failed"; exit 0; }
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=130 probe_variants 4b-16 ';--no-fold-norms'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=110 probe_variants 1.7b-16 ';--no-fold-norms'
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=160 probe_variants 4b-16x4096 ';--no-fold-norms'
