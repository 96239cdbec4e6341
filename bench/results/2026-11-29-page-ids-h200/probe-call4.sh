#!/usr/bin/env bash
# Call 4: the attention kernels take their page ids from a per-warp window of 32 in registers
# (WarpPageIds) instead of one global load a page: the attention checks, then tokens/s against
# the build before it (.device/dice_base, staged by BASE=) side by side.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
start=$SECONDS
probe_checks 150 'CudaOps.Attention*:CudaOps.DeepPaired*:CudaBackendTest.DeepAndPaired*:CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.Fp32Decoding*:CudaBackendTest.SeededSampling*'
echo "checks took $((SECONDS - start)) s"
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=100 probe_variants 4b-16 " ;bin=.device/dice_base.xz"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=100 probe_variants 4b-16x4096 " ;bin=.device/dice_base.xz"
MODELS=4b,1.7b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 128 " ;bin=.device/dice_base.xz"
