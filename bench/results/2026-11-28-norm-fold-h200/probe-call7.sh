#!/usr/bin/env bash
# Call 7: FusedNormAndSwigluChangeNoBits with the folds off in both of its backends (call 6: its
# unfused side had no SwiGLU epilogue, hence no MLP fold, and other bits), and the fold tests.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call7
probe_unpack_tests
probe_checks 200 'CudaBackendTest.FusedNormAndSwiglu*:CudaBackendTest.FoldedNorms*:CudaOps.*NormFold*:CudaOps.QkNormRope*'
