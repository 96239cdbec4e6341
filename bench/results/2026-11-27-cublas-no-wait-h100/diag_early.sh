#!/usr/bin/env bash
# temporary diagnosis (not committed)
T=.device/dice_engine_cuda_tests
run() { echo "== $*"; env "$@" timeout 120 $T --gtest_filter=CudaBackendTest.DiagEarlyCublas 2>&1 | grep "DIAG" | sort | uniq -c; }
for b in 264 4; do echo "== fill blocks $b"; DIAG_FILL_BLOCKS=$b timeout 200 $T --gtest_filter=CudaOps.CublasKernelsWait* 2>&1 | grep -E "wait|OK|FAILED" | head -40; done
run DIAG_SHAPE=2 DIAG_FILL_BLOCKS=4
run DIAG_SHAPE=1 DIAG_FILL_BLOCKS=4
