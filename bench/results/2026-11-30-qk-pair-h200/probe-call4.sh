#!/usr/bin/env bash
# Call 4: the review mend (wgmma_qk_tiles, Gemm::qk_rope_splits; the wgmma kernels' SASS
# identical to 41f7d99's): the q/k epilogue's and the wgmma kernel's GPU tests.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
probe_checks 300 'CudaOps.Wgmma*:CudaBackendTest.QkRope*:CudaBackendTest.Wgmma*:CudaBackendTest.Folded*'
