#!/usr/bin/env bash
# Call 3: the folded norm keeping bf16(w x) in shared memory after the first tile (no spills): checks, then
# without it.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 200 'CudaOps.StreamGemmFolded*:CudaOps.StreamGemmMatches*:CudaBackendTest.FoldedStreamNorms*' || exit 1
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=360 probe_variants fold-1 ' ;--fold-stream-norms'
